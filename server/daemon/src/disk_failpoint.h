// DiskFailpoint: a slow or stalled disk under the WAL, switched at run time (the chaos suite's
// disk fault). It installs a wal::FaultInjector on the node's WAL file system and drives it from
// GET requests on the metrics listener, served only when epochd runs with --enable-failpoints:
//
//   /failpoint/disk?sync_delay_ms=N   every WAL fdatasync and directory fsync first sleeps N ms
//                                     (N in [0, 60000]; 0 removes the delay)
//   /failpoint/disk?stall=1           every WAL fdatasync blocks until stall=0 or clear
//   /failpoint/disk?stall=0           releases the stalled fdatasyncs
//   /failpoint/disk?clear=1           removes every rule and releases everything
//
// The reply is 200 with a one-line summary, or 400 with a one-line reason. Only the WAL is
// affected (RocksDB runs with its own WAL off and is flushed outside the commit path).
//
// Threading: Handle() may be called from any thread, concurrently with WAL I/O.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "epoch/wal/fault_injector.h"
#include "epoch/wal/file_system.h"
#include "metrics_http.h"

namespace epoch::server {

class DiskFailpoint {
 public:
  static constexpr std::string_view kPathPrefix = "/failpoint/disk";

  // Installs the injector on `fs` (which must outlive this object).
  explicit DiskFailpoint(wal::FileSystem& fs);
  ~DiskFailpoint();
  DiskFailpoint(const DiskFailpoint&) = delete;
  DiskFailpoint& operator=(const DiskFailpoint&) = delete;

  // `target` is the request target: "/failpoint/disk?name=value".
  [[nodiscard]] HttpReply Handle(std::string_view target);

 private:
  wal::FileSystem& fs_;
  std::shared_ptr<wal::FaultInjector> faults_;
};

}  // namespace epoch::server
