// Recovery: reads every segment of a WAL directory, replays it into a LogModel and decides torn
// tail versus corruption (wal/FORMAT.md §6). It never modifies anything: wal::Wal::Open acts on
// the result (zeroes a torn tail), the epoch-wal tool reports it or repairs from it.
//
// Thread-safety: a plain function over the FileSystem; call it before the WAL's threads start.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "epoch/status.h"
#include "epoch/wal/file_system.h"
#include "epoch/wal/segment_scan.h"
#include "log_model.h"

namespace epoch::wal {

// Where recovery found damage it will not repair by itself.
struct Damage {
  std::uint64_t seq = 0;  // segment sequence number
  std::string path;
  std::uint64_t offset = 0;        // first byte that is not trusted (as reported)
  std::uint64_t frame_offset = 0;  // start of the frame holding it: where a repair cuts
  std::string what;
  // false: cutting the log here cannot help (its front is missing).
  bool truncatable = true;
  std::string detail;  // printed after the location, e.g. "; a valid frame follows at …"
};

struct RecoveredSegment {
  std::uint64_t seq = 0;
  std::string path;
  std::uint64_t file_bytes = 0;
  std::uint64_t end_offset = 0;  // where the next frame goes (after torn-tail truncation)
  std::uint64_t frames = 0;
  std::uint64_t records = 0;
  LogIndex max_entry_index;  // largest index of any entry record in it (0 if none)
  SegmentTail tail = SegmentTail::kClean;
  std::uint64_t garbage_end = 0;
};

struct TornTail {
  std::uint64_t seq = 0;
  std::string path;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;  // [offset, offset + bytes) is to be zeroed
};

struct RecoveryResult {
  Status status;                           // OK, or the Corruption that makes Wal::Open refuse
  std::optional<Damage> damage;            // set when status is Corruption with a location
  LogModel model;                          // replayed up to the damage (everything when OK)
  std::vector<RecoveredSegment> segments;  // the segments replayed (up to the damage)
  std::optional<TornTail> torn;            // in the last segment; safe to zero
  std::vector<std::string> warnings;
};

// Segment sequence numbers in `dir` (sorted), and the stray files a WAL does not use.
struct DirListing {
  std::vector<std::uint64_t> segments;
  std::vector<std::string> prealloc_files;  // names
};
[[nodiscard]] Result<DirListing> ListWalDir(FileSystem& fs, const std::string& dir);

[[nodiscard]] RecoveryResult RecoverLog(FileSystem& fs, const std::string& dir,
                                        const std::vector<std::uint64_t>& segments,
                                        std::uint64_t cache_bytes_max,
                                        const RecordVisitor& visitor = nullptr);

}  // namespace epoch::wal
