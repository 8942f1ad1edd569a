// RecoverLog: scan, verify and replay the segments of a WAL directory (wal/FORMAT.md §5-6).
#include "recovery.h"

#include <fmt/format.h>

#include <algorithm>

namespace epoch::wal {

Result<DirListing> ListWalDir(FileSystem& fs, const std::string& dir) {
  auto names = fs.ListDir(dir);
  if (!names.ok()) return names.status();
  DirListing out;
  for (const std::string& name : *names) {
    if (auto seq = format::ParseSegmentFileName(name)) {
      out.segments.push_back(*seq);
    } else if (name.ends_with(format::kPreallocSuffix)) {
      out.prealloc_files.push_back(name);
    }
  }
  std::sort(out.segments.begin(), out.segments.end());
  return out;
}

namespace {

class Replayer {
 public:
  Replayer(FileSystem& fs, RecoveryResult* result, std::uint64_t cache_bytes_max,
           const RecordVisitor& visitor)
      : fs_(fs), r_(*result), cache_bytes_max_(cache_bytes_max), visitor_(visitor) {}

  // Replays one segment. Returns false (with r_.status/r_.damage set) on corruption.
  bool Segment(const std::string& path, std::uint64_t seq, bool is_last) {
    auto file = fs_.Open(path, OpenMode::kRead);
    if (!file.ok()) return Fail(seq, path, 0, file.status().message(), file.status());
    auto image = ReadWholeFile(**file);
    if (!image.ok()) return Fail(seq, path, 0, image.status().message(), image.status());
    auto scan = ScanSegment(*image, seq);
    if (!scan.ok()) return Fail(seq, path, 0, scan.status().message());

    RecoveredSegment seg{seq, path,        scan->file_bytes, scan->end_offset, 0,
                         0,   LogIndex(0), scan->tail,       scan->garbage_end};
    for (std::size_t f = 0; f < scan->frames.size(); ++f) {
      if (!Frame(seg, scan->frames[f], f == 0)) return false;
    }
    if (scan->tail == SegmentTail::kValidFrameAfter) {
      r_.segments.push_back(seg);
      return Fail(Damage{seq, path, scan->end_offset, scan->end_offset,
                         fmt::format("bad frame ({})", scan->problem), true,
                         fmt::format("; a valid frame follows at offset {}",
                                     scan->frames_after_damage.front().view.offset)});
    }
    if (!is_last && scan->frames.empty()) {
      return Fail(seq, path, format::kSegmentHeaderBytes,
                  "sealed segment has no valid frame (" + scan->problem + ")");
    }
    if (scan->tail == SegmentTail::kGarbage) {
      if (is_last) {
        r_.torn = TornTail{seq, path, scan->end_offset, scan->garbage_end - scan->end_offset};
        r_.warnings.push_back(fmt::format(
            "torn tail in {} at offset {}: dropping {} bytes never acknowledged ({})", path,
            scan->end_offset, scan->garbage_end - scan->end_offset, scan->problem));
      } else {
        unproven_ = Damage{seq,
                           path,
                           scan->end_offset,
                           scan->end_offset,
                           fmt::format("bad frame in a sealed segment ({})", scan->problem),
                           true,
                           ""};
      }
    }
    r_.segments.push_back(seg);
    if (!scan->frames.empty()) first_segment_ = false;
    return true;
  }

  bool Finish() {
    if (unproven_) return Fail(*unproven_);
    if (Status s = r_.model.CheckGapFree(); !s.ok()) {
      const RecoveredSegment& first = r_.segments.front();
      return Fail(Damage{first.seq, first.path, format::kSegmentHeaderBytes,
                         format::kSegmentHeaderBytes, s.message(), false, ""});
    }
    return true;
  }

 private:
  bool Frame(RecoveredSegment& seg, const ScannedFrame& frame, bool first_frame) {
    for (std::size_t i = 0; i < frame.records.size(); ++i) {
      const format::DecodedRecord& rec = frame.records[i];
      const std::uint64_t file_offset = frame.view.offset + format::kFrameHeaderBytes + rec.offset;
      const bool want_checkpoint = first_frame && i == 0;
      const bool is_checkpoint = std::holds_alternative<format::Checkpoint>(rec.body);
      if (want_checkpoint != is_checkpoint) {
        return Fail(seg.seq, seg.path, file_offset,
                    want_checkpoint ? "segment does not start with a checkpoint"
                                    : "checkpoint record in the middle of a segment",
                    Status::Ok(), frame.view.offset);
      }
      Status s = Apply(seg, rec, file_offset);
      if (!s.ok()) {
        if (is_checkpoint && unproven_) return Fail(*unproven_);
        return Fail(seg.seq, seg.path, file_offset, s.message(), Status::Ok(), frame.view.offset);
      }
      if (is_checkpoint && unproven_) {
        r_.warnings.push_back(fmt::format(
            "{} at offset {}: {}; tolerated because the next segment's checkpoint proves "
            "nothing was lost",
            unproven_->path, unproven_->offset, unproven_->what));
        unproven_.reset();
      }
      if (visitor_) visitor_(seg.seq, file_offset, rec);
      seg.records++;
    }
    seg.frames++;
    r_.model.EvictTo(cache_bytes_max_);
    return true;
  }

  Status Apply(RecoveredSegment& seg, const format::DecodedRecord& rec, std::uint64_t file_offset) {
    LogModel& m = r_.model;
    if (const auto* c = std::get_if<format::Checkpoint>(&rec.body)) {
      return m.ApplyCheckpoint(*c, first_segment_);
    }
    if (const auto* e = std::get_if<raft::Entry>(&rec.body)) {
      Slot slot{e->term,   e->type,        0,    seg.seq, file_offset,
                rec.bytes, e->data.size(), true, e->data};
      if (e->index > seg.max_entry_index) seg.max_entry_index = e->index;
      return m.ApplyEntry(e->index, std::move(slot));
    }
    if (const auto* hs = std::get_if<raft::HardState>(&rec.body)) {
      m.ApplyHardState(*hs);
      return Status::Ok();
    }
    if (const auto* s = std::get_if<format::SnapshotRecord>(&rec.body)) {
      return m.ApplySnapshot(*s);
    }
    return m.ApplyTruncate(std::get<format::TruncateRecord>(rec.body).index);
  }

  bool Fail(std::uint64_t seq, const std::string& path, std::uint64_t offset, std::string what,
            Status io_error = Status::Ok(), std::optional<std::uint64_t> frame_offset = {}) {
    if (!io_error.ok()) {
      r_.status = io_error;
      return false;
    }
    return Fail(
        Damage{seq, path, offset, frame_offset.value_or(offset), std::move(what), true, ""});
  }

  bool Fail(const Damage& d) {
    r_.damage = d;
    r_.status = Status::Corruption(
        fmt::format("{} in {} at offset {}{}: refusing to open the WAL (see `epoch-wal verify` "
                    "and `epoch-wal repair` in wal/README.md)",
                    d.what, d.path, d.offset, d.detail));
    return false;
  }

  FileSystem& fs_;
  RecoveryResult& r_;
  const std::uint64_t cache_bytes_max_;
  const RecordVisitor& visitor_;
  bool first_segment_ = true;       // no segment with frames replayed yet
  std::optional<Damage> unproven_;  // a garbage tail in a sealed segment, until a checkpoint
};

}  // namespace

RecoveryResult RecoverLog(FileSystem& fs, const std::string& dir,
                          const std::vector<std::uint64_t>& segments, std::uint64_t cache_bytes_max,
                          const RecordVisitor& visitor) {
  RecoveryResult result;
  Replayer replayer(fs, &result, cache_bytes_max, visitor);
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const std::uint64_t seq = segments[i];
    const std::string path = JoinPath(dir, format::SegmentFileName(seq));
    if (i > 0 && seq != segments[i - 1] + 1) {
      const std::uint64_t missing = segments[i - 1] + 1;
      result.damage = Damage{missing, JoinPath(dir, format::SegmentFileName(missing)), 0,
                             0,       "segment missing (gap in sequence numbers)",     true,
                             ""};
      result.status = Status::Corruption(
          fmt::format("segment {} is missing between {} and {}: refusing to open the WAL", missing,
                      format::SegmentFileName(segments[i - 1]), format::SegmentFileName(seq)));
      return result;
    }
    if (!replayer.Segment(path, seq, i + 1 == segments.size())) return result;
  }
  if (!segments.empty()) (void)replayer.Finish();
  return result;
}

}  // namespace epoch::wal
