// ScanSegment: reads the frames of one segment image and classifies what follows the last valid
// frame (wal/FORMAT.md §6). Used by recovery (wal::Wal::Open), by the epoch-wal tool and by the
// randomized reader tests. Whether a garbage tail is a torn write or damage depends on where the
// segment sits in the log; that decision is the caller's (recovery.cc).
//
// Never trusts the image: arbitrary bytes give a clean result or a Corruption status.
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/status.h"
#include "epoch/wal/format.h"

namespace epoch::wal {

struct ScannedFrame {
  format::FrameView view;
  std::vector<format::DecodedRecord> records;
};

enum class SegmentTail : std::uint8_t {
  kClean,            // only zeros after the last valid frame
  kGarbage,          // non-zero bytes after it, but no valid frame
  kValidFrameAfter,  // a valid frame further on: the frame at end_offset was damaged
};

struct SegmentScan {
  std::uint64_t seq = 0;
  std::uint64_t file_bytes = 0;
  std::vector<ScannedFrame> frames;  // the valid frames from the start, in order
  std::uint64_t end_offset = 0;      // where they stop ("X" in FORMAT.md §6)
  SegmentTail tail = SegmentTail::kClean;
  std::uint64_t garbage_end = 0;  // last non-zero byte after end_offset, plus one
  std::string problem;            // why the frame at end_offset is not valid (unless kClean)
  // kValidFrameAfter: the valid frames found after the damage (for the repair report).
  std::vector<ScannedFrame> frames_after_damage;
};

// Called for every record replayed, in log order (recovery, the tool's `dump`).
using RecordVisitor = std::function<void(std::uint64_t segment_seq, std::uint64_t file_offset,
                                         const format::DecodedRecord& record)>;

// Fails (Corruption) only when the segment header is bad; everything else is described by the
// returned SegmentScan.
[[nodiscard]] Result<SegmentScan> ScanSegment(std::string_view image, std::uint64_t seq);

}  // namespace epoch::wal
