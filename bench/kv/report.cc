#include "report.h"

#include <fmt/format.h>

namespace epoch::bench {
namespace {

double Ms(std::uint64_t ns) { return static_cast<double>(ns) / 1e6; }

double OpsPerSecond(const LoadResult& r) {
  return r.window_seconds > 0 ? static_cast<double>(r.ops) / r.window_seconds : 0.0;
}

// CPU microseconds per successful operation; -1 when unknown.
double MicrosPerOp(double cpu_seconds, const LoadResult& r) {
  if (cpu_seconds < 0 || r.ops == 0) return -1;
  return cpu_seconds * 1e6 / static_cast<double>(r.ops);
}

}  // namespace

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(ch));
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string HumanReport(const LoadOptions& opts, const RunDescription& desc, const LoadResult& r) {
  const LatencyHistogram& h = r.latency;
  std::string out = fmt::format(
      "epoch_bench {}{}workload={} clients={} conns={} threads={} target={} endpoints={}\n"
      "  keys={} value={}B warmup={:.1f}s duration={:.1f}s\n"
      "  throughput: {:.0f} ops/s ({} ops in {:.2f} s), errors {}\n"
      "  latency ms: p50 {:.3f}  p90 {:.3f}  p99 {:.3f}  p99.9 {:.3f}  max {:.3f}  mean {:.3f}\n"
      "  cpu in window: client {:.2f} s ({:.0f} us/op, {:.0f}% of one core)",
      desc.label, desc.label.empty() ? "" : " ", WorkloadName(opts.workload), opts.clients,
      opts.connections, opts.threads, desc.target, desc.endpoints, opts.key_count,
      opts.value_size_bytes, std::chrono::duration<double>(opts.warmup).count(),
      std::chrono::duration<double>(opts.duration).count(), OpsPerSecond(r), r.ops,
      r.window_seconds, r.errors, Ms(h.ValueAtQuantile(0.5)), Ms(h.ValueAtQuantile(0.9)),
      Ms(h.ValueAtQuantile(0.99)), Ms(h.ValueAtQuantile(0.999)), Ms(h.Max()), h.Mean() / 1e6,
      r.client_cpu_seconds, MicrosPerOp(r.client_cpu_seconds, r),
      100.0 * r.client_cpu_seconds / std::max(1e-9, r.window_seconds));
  if (r.server_cpu_seconds >= 0) {
    out += fmt::format(", servers {:.2f} s ({:.0f} us/op, {:.0f}% of one core)",
                       r.server_cpu_seconds, MicrosPerOp(r.server_cpu_seconds, r),
                       100.0 * r.server_cpu_seconds / std::max(1e-9, r.window_seconds));
  }
  out += "\n";
  if (IsCas(opts.workload)) {
    const std::uint64_t n = r.cas_succeeded + r.cas_failed;
    out +=
        fmt::format("  cas: {} succeeded, {} failed compare ({:.1f}% succeeded)\n", r.cas_succeeded,
                    r.cas_failed, n == 0 ? 0.0 : 100.0 * static_cast<double>(r.cas_succeeded) / n);
  }
  for (const auto& [code, e] : r.errors_by_code) {
    out += fmt::format("  error code {}: {} times, first: {}\n", code, e.count, e.first_message);
  }
  if (r.malformed_replies > 0) {
    out += fmt::format("  MALFORMED replies (break the etcd contract): {}\n", r.malformed_replies);
  }
  return out;
}

std::string JsonReport(const LoadOptions& opts, const RunDescription& desc, const LoadResult& r) {
  const LatencyHistogram& h = r.latency;
  std::string errors = "{";
  for (const auto& [code, e] : r.errors_by_code) {
    if (errors.size() > 1) errors += ",";
    errors += fmt::format("\"{}\":{{\"count\":{},\"first\":{}}}", code, e.count,
                          JsonString(e.first_message));
  }
  errors += "}";
  return fmt::format(
      "{{\"label\":{},\"workload\":\"{}\",\"clients\":{},\"conns\":{},\"threads\":{},"
      "\"target\":\"{}\",\"endpoints\":{},\"keys\":{},\"value_bytes\":{},"
      "\"window_s\":{:.3f},\"ops\":{},\"ops_per_sec\":{:.1f},\"errors\":{},"
      "\"p50_ms\":{:.4f},\"p90_ms\":{:.4f},\"p99_ms\":{:.4f},\"p999_ms\":{:.4f},"
      "\"max_ms\":{:.4f},\"mean_ms\":{:.4f},\"cas_succeeded\":{},\"cas_failed\":{},"
      "\"malformed\":{},\"client_cpu_s\":{:.3f},\"client_cpu_us_per_op\":{:.1f},"
      "\"server_cpu_s\":{:.3f},\"server_cpu_us_per_op\":{:.1f},\"errors_by_code\":{}}}",
      JsonString(desc.label), WorkloadName(opts.workload), opts.clients, opts.connections,
      opts.threads, desc.target, JsonString(desc.endpoints), opts.key_count, opts.value_size_bytes,
      r.window_seconds, r.ops, OpsPerSecond(r), r.errors, Ms(h.ValueAtQuantile(0.5)),
      Ms(h.ValueAtQuantile(0.9)), Ms(h.ValueAtQuantile(0.99)), Ms(h.ValueAtQuantile(0.999)),
      Ms(h.Max()), h.Mean() / 1e6, r.cas_succeeded, r.cas_failed, r.malformed_replies,
      r.client_cpu_seconds, MicrosPerOp(r.client_cpu_seconds, r), r.server_cpu_seconds,
      MicrosPerOp(r.server_cpu_seconds, r), errors);
}

}  // namespace epoch::bench
