// ScanSegment: valid frames first, then classification of the rest (wal/FORMAT.md §6).
#include "epoch/wal/segment_scan.h"

#include <algorithm>
#include <cstring>

namespace epoch::wal {

namespace {

// True when bytes [from, to) of image could be a frame header at `from` worth a full check.
bool LooksLikeFrame(std::string_view image, std::uint64_t seq, std::uint64_t at) {
  if (image.size() - at < format::kFrameHeaderBytes) return false;
  std::uint32_t magic = 0;
  std::uint64_t own_seq = 0, own_offset = 0;
  std::memcpy(&magic, image.data() + at + 28, 4);
  std::memcpy(&own_seq, image.data() + at + 8, 8);
  std::memcpy(&own_offset, image.data() + at + 16, 8);
  return magic == format::kFrameMagic && own_seq == seq && own_offset == at;
}

// Takes consecutive valid frames starting at `offset`; returns where they stop.
std::uint64_t TakeFrames(std::string_view image, std::uint64_t seq, std::uint64_t offset,
                         std::vector<ScannedFrame>* frames, std::string* why,
                         format::FrameCheck* stop) {
  for (;;) {
    ScannedFrame frame;
    *stop = format::CheckFrame(image, seq, offset, &frame.view, &frame.records, why);
    if (*stop != format::FrameCheck::kValid) return offset;
    offset += frame.view.total_bytes;
    frames->push_back(std::move(frame));
    if (offset >= image.size()) {
      *stop = format::FrameCheck::kZero;
      return offset;
    }
  }
}

}  // namespace

Result<SegmentScan> ScanSegment(std::string_view image, std::uint64_t seq) {
  EPOCH_RETURN_IF_ERROR(format::CheckSegmentHeader(image, seq));
  SegmentScan scan;
  scan.seq = seq;
  scan.file_bytes = image.size();
  format::FrameCheck stop{};
  scan.end_offset =
      TakeFrames(image, seq, format::kSegmentHeaderBytes, &scan.frames, &scan.problem, &stop);
  if (stop == format::FrameCheck::kZero) scan.problem.clear();

  // Classify [end_offset, end of file).
  const std::string_view rest =
      image.substr(std::min<std::uint64_t>(scan.end_offset, image.size()));
  const auto last_nonzero = std::find_if(rest.rbegin(), rest.rend(), [](char c) { return c != 0; });
  if (last_nonzero == rest.rend()) {
    scan.tail = SegmentTail::kClean;
    scan.garbage_end = scan.end_offset;
    return scan;
  }
  scan.garbage_end = scan.end_offset + static_cast<std::uint64_t>(rest.rend() - last_nonzero);
  if (scan.problem.empty()) scan.problem = "non-zero bytes after an all-zero frame header";
  scan.tail = SegmentTail::kGarbage;
  for (std::uint64_t y = format::Align8(scan.end_offset + 1); y < scan.garbage_end; y += 8) {
    if (!LooksLikeFrame(image, seq, y)) continue;
    std::vector<ScannedFrame> after;
    std::string why;
    format::FrameCheck after_stop{};
    if (TakeFrames(image, seq, y, &after, &why, &after_stop) == y) continue;  // not valid
    scan.tail = SegmentTail::kValidFrameAfter;
    scan.frames_after_damage = std::move(after);
    break;
  }
  return scan;
}

}  // namespace epoch::wal
