// Private pieces of wal::Wal shared by wal.cc (requests, reads, recovery) and wal_sync.cc (the
// sync and preallocator threads).
#pragma once

#include <fmt/format.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "epoch/wal/format.h"
#include "epoch/wal/wal.h"
#include "log_model.h"

// An impossible state inside the WAL: report and abort (assertions stay on in release builds).
#define EPOCH_WAL_CHECK(cond, ...)                                                          \
  do {                                                                                      \
    if (!(cond)) {                                                                          \
      fmt::print(stderr, "wal: check failed at {}:{}: {}: {}\n", __FILE__, __LINE__, #cond, \
                 fmt::format(__VA_ARGS__));                                                 \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)

namespace epoch::wal {

// Where an entry record sits inside the pending records, to be turned into a file offset once
// its frame is placed.
struct Wal::Placement {
  LogIndex index;
  std::uint64_t op_seq = 0;
  std::uint64_t offset = 0;  // in Pending::records
  std::uint32_t bytes = 0;
};

// Requests accepted but not yet handed to the sync thread; the sync thread takes the whole
// structure as one batch (one frame).
struct Wal::Pending {
  std::string records;
  std::uint32_t record_count = 0;
  std::vector<Placement> placements;
  std::vector<DurableCallback> callbacks;
  std::optional<LogIndex> snapshot_index;  // compact once this batch is durable
  LogIndex max_entry_index;
  format::Checkpoint state_after;  // the log after this batch; set when the batch is taken

  [[nodiscard]] bool Empty() const { return records.empty() && callbacks.empty(); }
};

struct Wal::Segment {
  std::uint64_t seq = 0;
  std::string path;
  std::shared_ptr<File> file;
  // Largest index of any entry ever written into this segment (compaction bound).
  LogIndex max_entry_index;
};

// Hand-off between the sync thread (requests the next segment) and the preallocator thread.
struct Wal::Prealloc {
  std::mutex mu;
  std::condition_variable cv;
  std::optional<std::uint64_t> requested;  // guarded by mu
  bool has_ready = false;                  // guarded by mu
  std::uint64_t ready_seq = 0;             // guarded by mu
  std::unique_ptr<File> ready_file;        // guarded by mu
  Status ready_status;                     // guarded by mu
  bool stop = false;                       // guarded by mu
};

}  // namespace epoch::wal
