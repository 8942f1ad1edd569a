// Offline inspection and repair of a WAL directory: the library behind the `epoch-wal` tool
// (verify, dump, repair --truncate-after-corruption; wal/README.md). Never used by a running
// node: run it only while no process has the WAL open (it takes the directory lock).
//
// Thread-safety: plain functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "epoch/raft/types.h"
#include "epoch/status.h"
#include "epoch/wal/file_system.h"
#include "epoch/wal/segment_scan.h"

namespace epoch::wal {

struct InspectSegment {
  std::uint64_t seq = 0;
  std::string path;
  std::uint64_t file_bytes = 0;
  std::uint64_t end_offset = 0;
  std::uint64_t frames = 0;
  std::uint64_t records = 0;
  LogIndex max_entry_index;
  SegmentTail tail = SegmentTail::kClean;
};

struct InspectReport {
  // What Wal::Open would do: OK (possibly after truncating a torn tail) or refuse (Corruption).
  Status status;
  // Corruption: where the first untrusted byte is, and the frame a repair would cut at.
  std::optional<std::string> damage_path;
  std::uint64_t damage_seq = 0;
  std::uint64_t damage_offset = 0;
  std::uint64_t damage_frame_offset = 0;
  bool damage_truncatable = true;
  // A torn tail Wal::Open would truncate (bytes > 0).
  std::optional<std::string> torn_path;
  std::uint64_t torn_offset = 0;
  std::uint64_t torn_bytes = 0;
  std::vector<InspectSegment> segments;  // replayed ones (up to the damage)
  std::vector<std::string> warnings;
  // The log as replayed (up to the damage).
  raft::HardState hard_state;
  raft::SnapshotMeta snapshot;
  LogIndex first_index;
  LogIndex last_index;
};

// Reads and verifies every segment without changing anything. Fails only on I/O errors (a
// damaged WAL is a successful inspection whose report.status is Corruption).
[[nodiscard]] Result<InspectReport> Inspect(FileSystem& fs, const std::string& dir,
                                            const RecordVisitor& visitor = nullptr);

// What `repair --truncate-after-corruption` would drop.
struct RepairPlan {
  bool needed = false;    // false: the WAL opens as it is
  bool possible = false;  // false: why_not says why (e.g. the front of the log is missing)
  std::string why_not;
  std::string damaged_path;  // cut at cut_offset (copy kept as <name>.broken); empty for a gap
  std::uint64_t cut_offset = 0;
  std::vector<std::string> moved_aside;  // later segments, renamed to <name>.broken
  // Dropped data that still looked valid (frames after the damage, later segments):
  std::uint64_t frames_dropped = 0;
  std::uint64_t entries_dropped = 0;
  LogIndex min_index_dropped;
  LogIndex max_index_dropped;
  std::uint64_t hard_states_dropped = 0;
  Term max_term_dropped;               // highest term in any dropped entry or hard state
  std::uint64_t unreadable_bytes = 0;  // damaged bytes whose content is unknown
  // The log that remains after the repair.
  raft::HardState hard_state_after;
  LogIndex last_index_after;

  [[nodiscard]] std::string Describe() const;
};

[[nodiscard]] Result<RepairPlan> PlanRepair(FileSystem& fs, const std::string& dir);
// Executes a plan made by PlanRepair on the same, unchanged directory, then verifies that the WAL
// opens. Keeps evidence: the damaged segment is copied to <name>.broken before it is cut, later
// segments are renamed to <name>.broken.
[[nodiscard]] Status ExecuteRepair(FileSystem& fs, const std::string& dir, const RepairPlan& plan);

}  // namespace epoch::wal
