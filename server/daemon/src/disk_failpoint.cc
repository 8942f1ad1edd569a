#include "disk_failpoint.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>
#include <chrono>

#include "failpoint_query.h"

namespace epoch::server {
namespace {

constexpr long kMaxDelayMs = 60'000;

bool ParseNumber(std::string_view text, long* out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && ptr == text.data() + text.size();
}

}  // namespace

DiskFailpoint::DiskFailpoint(wal::FileSystem& fs)
    : fs_(fs), faults_(std::make_shared<wal::FaultInjector>()) {
  fs_.SetFaultHook(faults_);
}

DiskFailpoint::~DiskFailpoint() {
  faults_->Clear();
  fs_.SetFaultHook(nullptr);
}

HttpReply DiskFailpoint::Handle(std::string_view target) {
  const std::optional<FailpointQuery> query = ParseFailpointQuery(target, kPathPrefix.size());
  if (!query) return {400, "expected /failpoint/disk?sync_delay_ms=N, ?stall=0|1 or ?clear=1\n"};
  const std::string_view name = query->key;
  long value = 0;
  if (!ParseNumber(query->value, &value) || value < 0) {
    return {400, fmt::format("bad value in '{}': expected a non-negative integer\n", target)};
  }
  using wal::FsOp;
  if (name == "sync_delay_ms") {
    if (value > kMaxDelayMs)
      return {400, fmt::format("sync_delay_ms must be <= {}\n", kMaxDelayMs)};
    auto delay = std::chrono::milliseconds(value);
    faults_->SetDelay(FsOp::kSync, delay);
    faults_->SetDelay(FsOp::kSyncDir, delay);
  } else if (name == "stall") {
    if (value != 0) {
      faults_->Stall(FsOp::kSync);
    } else {
      faults_->Release(FsOp::kSync);
    }
  } else if (name == "clear") {
    faults_->Clear();
  } else {
    return {400, fmt::format("unknown disk failpoint '{}'\n", name)};
  }
  spdlog::warn("disk failpoint {}={} (blocked syncs now {})", name, value, faults_->Blocked());
  return {200, fmt::format("ok {}={} blocked={}\n", name, value, faults_->Blocked())};
}

}  // namespace epoch::server
