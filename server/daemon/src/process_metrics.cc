#include "process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace epoch::server {
namespace {

// The fields of /proc/self/stat after the command name (field 3, "state", is index 0).
std::optional<std::vector<std::string>> StatFields() {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  // The command name is in parentheses and may hold spaces: fields start after the last ')'.
  const std::size_t close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(line.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

// proc(5) numbering: field n is fields[n - 3].
double Field(const std::vector<std::string>& fields, std::size_t n) {
  return n - 3 < fields.size() ? std::stod(fields[n - 3]) : 0.0;
}

std::optional<double> BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double btime = 0;
      if (in >> btime) return btime;
      return std::nullopt;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return std::nullopt;
}

std::size_t OpenFds() {
  std::error_code ec;
  std::size_t n = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++n;
  }
  // The directory's own descriptor, open while it was listed, is not the process's.
  return n > 0 ? n - 1 : 0;
}

}  // namespace

void RenderProcessMetrics(MetricsText& m) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (auto fields = StatFields(); fields && fields->size() >= 22) {
    // utime 14, stime 15, num_threads 20, starttime 22, vsize 23, rss 24 (pages).
    m.Counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds.",
              (Field(*fields, 14) + Field(*fields, 15)) / ticks);
    m.Gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
            Field(*fields, 24) * page);
    m.Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", Field(*fields, 23));
    m.Gauge("process_threads", "Number of OS threads in the process.", Field(*fields, 20));
    if (auto boot = BootTimeSeconds()) {
      m.Gauge("process_start_time_seconds",
              "Start time of the process since unix epoch in seconds.",
              *boot + Field(*fields, 22) / ticks);
    }
  }
  rlimit as{};
  if (getrlimit(RLIMIT_AS, &as) == 0) {
    m.Gauge("process_virtual_memory_max_bytes",
            "Maximum amount of virtual memory available in bytes.",
            as.rlim_cur == RLIM_INFINITY ? -1.0 : static_cast<double>(as.rlim_cur));
  }
  m.Gauge("process_open_fds", "Number of open file descriptors.", OpenFds());
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
    m.Gauge("process_max_fds", "Maximum number of open file descriptors.",
            static_cast<double>(nofile.rlim_cur));
  }
}

}  // namespace epoch::server
