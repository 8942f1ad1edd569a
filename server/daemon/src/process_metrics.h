// The process_* metrics Prometheus' client libraries export (client_golang's process collector,
// which etcd serves), read from /proc/self on each scrape:
//
//   process_cpu_seconds_total          user + system CPU time (/proc/self/stat)
//   process_resident_memory_bytes      resident set size
//   process_virtual_memory_bytes       virtual memory size
//   process_virtual_memory_max_bytes   RLIMIT_AS (-1: unlimited, as client_golang reports it)
//   process_open_fds                   entries in /proc/self/fd
//   process_max_fds                    RLIMIT_NOFILE's soft limit
//   process_start_time_seconds         start time since the Unix epoch (boot time + starttime)
//   process_threads                    threads of the process
//
// Threading: any thread. A value /proc cannot give is left out of the output rather than guessed.
#pragma once

#include "epoch/metrics_text.h"

namespace epoch::server {

void RenderProcessMetrics(MetricsText& m);

}  // namespace epoch::server
