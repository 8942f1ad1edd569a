// Private pieces of wal::Wal shared by wal.cc (requests, reads, recovery) and wal_sync.cc (the
// sync and preallocator threads).
#pragma once

#include <fmt/format.h>

#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <deque>
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

// Where an entry record sits inside the pending payload (Pending::records after its frame header
// space), to be turned into a file offset once its frame is placed.
struct Wal::Placement {
  LogIndex index;
  std::uint64_t op_seq = 0;
  std::uint64_t offset = 0;  // from the start of the payload
  std::uint32_t bytes = 0;
};

// Requests accepted but not yet handed to the sync thread; the sync thread takes the whole
// structure as one batch (one frame). `records` starts with room for the frame header, so the
// frame is built in place: a record is copied once into it (under mu_) and once into the page
// cache, never into an intermediate frame buffer. The sync thread recycles the structure (and
// its buffer's capacity) for a later batch.
struct Wal::Pending {
  std::string records = std::string(format::kFrameHeaderBytes, '\0');
  std::uint32_t record_count = 0;
  std::vector<Placement> placements;
  std::vector<DurableCallback> callbacks;
  std::optional<LogIndex> snapshot_index;  // compact once this batch is durable
  LogIndex max_entry_index;
  format::Checkpoint state_after;  // the log after this batch; set when the batch is taken

  [[nodiscard]] std::uint64_t PayloadBytes() const {
    return records.size() - format::kFrameHeaderBytes;
  }
  [[nodiscard]] bool Empty() const { return PayloadBytes() == 0 && callbacks.empty(); }
  // Back to the empty state, keeping the buffers' capacity.
  void Reset() {
    records.assign(format::kFrameHeaderBytes, '\0');
    record_count = 0;
    placements.clear();
    callbacks.clear();
    snapshot_index.reset();
    max_entry_index = LogIndex(0);
    state_after = format::Checkpoint{};
  }
};

// Batches whose outcome is known (durable, or failed), handed by the sync thread to the
// completion thread, which runs their callbacks in order. So waking the callers (a futex wake
// each) overlaps the next batch's write and fdatasync instead of delaying them. The sync thread
// pushes a batch only after its fdatasync returned (or the WAL failed), so no callback can run
// before its record is durable.
struct Wal::Completion {
  struct Batch {
    std::vector<DurableCallback> callbacks;
    Status status;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Batch> ready;  // guarded by mu; in submission order
  bool stop = false;        // guarded by mu: set once the sync thread has exited
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
