// The WAL's on-disk encoding: segment names and headers, frames and records. The format itself
// is specified in wal/FORMAT.md; this file is its code. Internal to wal/, but public so that the
// tests (randomized decoding) and the epoch-wal tool can use it.
//
// Decoding never trusts its input: arbitrary bytes give a Corruption status, never a crash, an
// out-of-bounds read or an unbounded allocation.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "epoch/raft/types.h"
#include "epoch/status.h"

namespace epoch::wal::format {

inline constexpr std::uint32_t kVersion = 1;
inline constexpr std::uint64_t kSegmentHeaderBytes = 32;
inline constexpr std::uint64_t kFrameHeaderBytes = 32;
inline constexpr std::uint64_t kRecordHeaderBytes = 12;
inline constexpr std::uint32_t kFrameMagic = 0x454d5246;  // "FRME" little-endian
inline constexpr std::string_view kSegmentMagic = "EPOCHWAL";
// Upper bound on any one record body, so a corrupt length cannot make us allocate wildly.
inline constexpr std::uint32_t kRecordBodyBytesMax = 256u << 20;
// Bound on voters/learners in a snapshot meta (a corrupt count cannot allocate wildly either).
inline constexpr std::uint32_t kConfMembersMax = 4096;

[[nodiscard]] constexpr std::uint64_t Align8(std::uint64_t n) {
  return (n + 7) & ~std::uint64_t{7};
}
[[nodiscard]] constexpr std::uint64_t FrameBytes(std::uint64_t payload_bytes) {
  return Align8(kFrameHeaderBytes + payload_bytes);
}

enum class RecordType : std::uint8_t {
  kCheckpoint = 1,
  kEntry = 2,
  kHardState = 3,
  kSnapshot = 4,
  kTruncate = 5,
};
[[nodiscard]] std::string_view RecordTypeName(RecordType type);

// The log as of the end of the previous segment; the first record of every segment.
struct Checkpoint {
  raft::HardState hard_state;
  raft::SnapshotMeta snapshot;
  LogIndex next_index;  // last index + 1

  friend bool operator==(const Checkpoint&, const Checkpoint&) = default;
};

struct SnapshotRecord {
  raft::SnapshotMeta meta;
  bool discard_log = false;  // true: the whole log was dropped (Raft §7, mismatching snapshot)
  friend bool operator==(const SnapshotRecord&, const SnapshotRecord&) = default;
};

struct TruncateRecord {
  LogIndex index;  // entries >= index are removed
  friend bool operator==(const TruncateRecord&, const TruncateRecord&) = default;
};

using RecordBody =
    std::variant<Checkpoint, raft::Entry, raft::HardState, SnapshotRecord, TruncateRecord>;

struct DecodedRecord {
  std::uint64_t offset = 0;  // of the record header, relative to the start of the payload
  std::uint32_t bytes = 0;   // header + body
  RecordBody body;
};

// --- Names -------------------------------------------------------------------------------------
[[nodiscard]] std::string SegmentFileName(std::uint64_t seq);   // "0000000000000001.wal"
[[nodiscard]] std::string PreallocFileName(std::uint64_t seq);  // "…0002.wal.prealloc"
[[nodiscard]] std::optional<std::uint64_t> ParseSegmentFileName(std::string_view name);
inline constexpr std::string_view kPreallocSuffix = ".prealloc";
inline constexpr std::string_view kLockFileName = "LOCK";

// --- Segment header ----------------------------------------------------------------------------
[[nodiscard]] std::string EncodeSegmentHeader(std::uint64_t seq);
// Checks magic, version, CRC and the sequence number against the file name's.
[[nodiscard]] Status CheckSegmentHeader(std::string_view image, std::uint64_t expected_seq);

// --- Records -----------------------------------------------------------------------------------
void AppendCheckpointRecord(std::string* out, const Checkpoint& c);
void AppendEntryRecord(std::string* out, const raft::Entry& e);
void AppendHardStateRecord(std::string* out, const raft::HardState& hs);
void AppendSnapshotRecord(std::string* out, const SnapshotRecord& s);
void AppendTruncateRecord(std::string* out, LogIndex index);
[[nodiscard]] std::uint64_t EntryRecordBytes(const raft::Entry& e);

// Decodes the record at `offset` of `payload`.
[[nodiscard]] Result<DecodedRecord> DecodeRecord(std::string_view payload, std::uint64_t offset);
// Decodes a payload that must hold exactly `count` records.
[[nodiscard]] Result<std::vector<DecodedRecord>> DecodePayload(std::string_view payload,
                                                               std::uint32_t count);

// --- Frames ------------------------------------------------------------------------------------
// The 32-byte header for `payload` (which the caller writes right after it, then pads to align8).
[[nodiscard]] std::string EncodeFrameHeader(std::uint64_t segment_seq, std::uint64_t offset,
                                            std::uint32_t record_count, std::string_view payload);

struct FrameView {
  std::uint64_t offset = 0;       // of the frame in its segment
  std::uint64_t total_bytes = 0;  // header + payload + padding
  std::uint32_t record_count = 0;
  std::string_view payload;  // points into the segment image
};

enum class FrameCheck : std::uint8_t {
  kValid,
  kZero,     // an all-zero header: the end of the frames
  kInvalid,  // anything else; *why says what
};

// Validates the frame at `offset` of `image` (a whole segment file), including every record's
// checksum and body (FORMAT.md §4, "A frame is valid iff"). On kValid fills *out and, when
// `records` is not null, the decoded records.
[[nodiscard]] FrameCheck CheckFrame(std::string_view image, std::uint64_t segment_seq,
                                    std::uint64_t offset, FrameView* out,
                                    std::vector<DecodedRecord>* records, std::string* why);

}  // namespace epoch::wal::format
