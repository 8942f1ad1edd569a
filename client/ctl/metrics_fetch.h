// process_resident_memory_bytes from a member's /metrics, as etcdctl 3.4's check datascale reads
// it (endpointMemoryMetrics in etcdctl/ctlv3/command/util.go): an HTTP GET of
// http://<endpoint>/metrics (the client port serves it, docs/metrics.md §1) and the first line
// that starts with the metric's name.
//
// Plain HTTP only: an https:// endpoint is refused with a "fetch error" (a member with client TLS
// serves /metrics on --listen-metrics-urls, which epochctl does not know).
//
// Threading: pure functions and one blocking call.
#pragma once

#include <chrono>
#include <string>

#include "epoch/status.h"

namespace epoch::ctl {

// The value of the first line of `body` that starts with process_resident_memory_bytes; the
// error carries etcdctl's words ("could not find: ...", "parse error: ...").
Result<double> ResidentMemoryBytes(const std::string& body);

// The body of an HTTP/1.1 response (`Content-Length`, chunked or up to the end); an error for a
// response without a header end.
Result<std::string> HttpResponseBody(const std::string& response);

// GETs http://<endpoint>/metrics and reads the resident memory from it; the error carries the
// whole line etcdctl prints ("fetch error: Get \"http://...\": ...", "could not find: ...").
// `timeout` bounds connecting and each read.
Result<double> FetchResidentMemoryBytes(const std::string& endpoint,
                                        std::chrono::milliseconds timeout);

}  // namespace epoch::ctl
