// Inspect / PlanRepair / ExecuteRepair: the epoch-wal tool's library (wal/README.md).
#include "epoch/wal/inspect.h"

#include <fmt/format.h>

#include <algorithm>

#include "recovery.h"

namespace epoch::wal {

namespace {

// Collects what valid-looking data a repair would drop.
void CountDropped(const std::vector<ScannedFrame>& frames, RepairPlan* plan) {
  for (const ScannedFrame& frame : frames) {
    plan->frames_dropped++;
    for (const format::DecodedRecord& rec : frame.records) {
      if (const auto* e = std::get_if<raft::Entry>(&rec.body)) {
        plan->entries_dropped++;
        if (plan->min_index_dropped.IsZero() || e->index < plan->min_index_dropped) {
          plan->min_index_dropped = e->index;
        }
        plan->max_index_dropped = std::max(plan->max_index_dropped, e->index);
        plan->max_term_dropped = std::max(plan->max_term_dropped, e->term);
      } else if (const auto* hs = std::get_if<raft::HardState>(&rec.body)) {
        plan->hard_states_dropped++;
        plan->max_term_dropped = std::max(plan->max_term_dropped, hs->term);
      }
    }
  }
}

Status ScanForDropped(FileSystem& fs, const std::string& path, std::uint64_t seq,
                      std::uint64_t from_offset, RepairPlan* plan) {
  auto file = fs.Open(path, OpenMode::kRead);
  if (!file.ok()) return file.status();
  auto image = ReadWholeFile(**file);
  if (!image.ok()) return image.status();
  auto scan = ScanSegment(*image, seq);
  if (!scan.ok()) {
    plan->unreadable_bytes += image->size();
    return Status::Ok();
  }
  std::vector<ScannedFrame> dropped;
  for (ScannedFrame& f : scan->frames) {
    if (f.view.offset >= from_offset) dropped.push_back(std::move(f));
  }
  for (ScannedFrame& f : scan->frames_after_damage) dropped.push_back(std::move(f));
  CountDropped(dropped, plan);
  if (scan->tail != SegmentTail::kClean) {
    plan->unreadable_bytes += scan->garbage_end - std::max(scan->end_offset, from_offset);
  }
  return Status::Ok();
}

}  // namespace

Result<InspectReport> Inspect(FileSystem& fs, const std::string& dir,
                              const RecordVisitor& visitor) {
  auto listing = ListWalDir(fs, dir);
  if (!listing.ok()) return listing.status();
  RecoveryResult r = RecoverLog(fs, dir, listing->segments, 0, visitor);
  if (!r.status.ok() && !r.status.Is(StatusCode::kCorruption)) return r.status;
  InspectReport report;
  report.status = r.status;
  if (r.damage) {
    report.damage_path = r.damage->path;
    report.damage_seq = r.damage->seq;
    report.damage_offset = r.damage->offset;
    report.damage_frame_offset = r.damage->frame_offset;
    report.damage_truncatable = r.damage->truncatable;
  }
  if (r.torn) {
    report.torn_path = r.torn->path;
    report.torn_offset = r.torn->offset;
    report.torn_bytes = r.torn->bytes;
  }
  for (const RecoveredSegment& s : r.segments) {
    report.segments.push_back(InspectSegment{s.seq, s.path, s.file_bytes, s.end_offset, s.frames,
                                             s.records, s.max_entry_index, s.tail});
  }
  report.warnings = r.warnings;
  report.hard_state = r.model.hard_state();
  report.snapshot = r.model.snapshot();
  report.first_index = r.model.FirstIndex();
  report.last_index = r.model.LastIndex();
  if (listing->segments.empty()) {
    report.status = Status::NotFound(fmt::format("no WAL segments in {}", dir));
  }
  return report;
}

Result<RepairPlan> PlanRepair(FileSystem& fs, const std::string& dir) {
  auto report = Inspect(fs, dir);
  if (!report.ok()) return report.status();
  RepairPlan plan;
  if (report->status.ok()) return plan;
  plan.needed = true;
  if (!report->damage_path) {
    plan.why_not = report->status.ToString();
    return plan;
  }
  auto listing = ListWalDir(fs, dir);
  if (!listing.ok()) return listing.status();
  const std::uint64_t seq = report->damage_seq;
  const bool file_exists =
      std::find(listing->segments.begin(), listing->segments.end(), seq) != listing->segments.end();
  if (!report->damage_truncatable) {
    plan.why_not = report->status.message() + "; rebuild this node from its peers";
    return plan;
  }
  if (file_exists) {
    plan.damaged_path = *report->damage_path;
    plan.cut_offset = std::max(report->damage_frame_offset, format::kSegmentHeaderBytes);
    EPOCH_RETURN_IF_ERROR(ScanForDropped(fs, plan.damaged_path, seq, plan.cut_offset, &plan));
    if (report->damage_offset == 0) plan.cut_offset = 0;  // bad header: the whole file goes
  }
  for (std::uint64_t later : listing->segments) {
    if (later < seq || (later == seq && file_exists && plan.cut_offset > 0)) continue;
    const std::string path = JoinPath(dir, format::SegmentFileName(later));
    plan.moved_aside.push_back(path);
    if (later != seq) EPOCH_RETURN_IF_ERROR(ScanForDropped(fs, path, later, 0, &plan));
  }
  plan.possible = true;
  plan.hard_state_after = report->hard_state;
  plan.last_index_after = report->last_index;
  return plan;
}

std::string RepairPlan::Describe() const {
  if (!needed) return "the WAL is intact (a torn tail, if any, is truncated on open): no repair\n";
  if (!possible) return fmt::format("cannot repair by truncation: {}\n", why_not);
  std::string out;
  if (!damaged_path.empty() && cut_offset > 0) {
    out += fmt::format("- cut {} at offset {} (a full copy is kept as {}.broken)\n", damaged_path,
                       cut_offset, damaged_path);
  }
  for (const std::string& p : moved_aside) {
    out += fmt::format("- move {} aside to {}.broken\n", p, p);
  }
  out += fmt::format(
      "- drops {} valid-looking frames after the damage: {} entries{}, {} hard states, highest "
      "term {}; plus {} unreadable bytes\n",
      frames_dropped, entries_dropped,
      entries_dropped > 0 ? fmt::format(" (indexes {}..{})", min_index_dropped, max_index_dropped)
                          : std::string(),
      hard_states_dropped, max_term_dropped, unreadable_bytes);
  out += fmt::format("- afterwards: last index {}, hard state term {} vote {} commit {}\n",
                     last_index_after, hard_state_after.term, hard_state_after.vote,
                     hard_state_after.commit);
  if (max_term_dropped > hard_state_after.term || entries_dropped > 0) {
    out +=
        "WARNING: dropped data may have been acknowledged to the cluster (entries this node "
        "acked, or a vote it cast). Prefer removing this member and re-adding it empty; repair "
        "only when that is impossible (see wal/README.md).\n";
  }
  return out;
}

Status ExecuteRepair(FileSystem& fs, const std::string& dir, const RepairPlan& plan) {
  if (!plan.needed) return Status::Ok();
  if (!plan.possible) return Status::FailedPrecondition(plan.why_not);
  auto lock = fs.Lock(JoinPath(dir, format::kLockFileName));
  if (!lock.ok()) return lock.status();
  if (!plan.damaged_path.empty() && plan.cut_offset > 0) {
    auto file = fs.Open(plan.damaged_path, OpenMode::kReadWrite);
    if (!file.ok()) return file.status();
    auto image = ReadWholeFile(**file);
    if (!image.ok()) return image.status();
    const std::string copy_path = plan.damaged_path + ".broken";
    if (fs.Exists(copy_path)) EPOCH_RETURN_IF_ERROR(fs.Remove(copy_path));
    auto copy = fs.Open(copy_path, OpenMode::kCreateExclusive);
    if (!copy.ok()) return copy.status();
    EPOCH_RETURN_IF_ERROR((*copy)->Write(0, *image));
    EPOCH_RETURN_IF_ERROR((*copy)->Sync());
    if (plan.cut_offset < image->size()) {
      const std::string zeros(image->size() - plan.cut_offset, '\0');
      EPOCH_RETURN_IF_ERROR((*file)->Write(plan.cut_offset, zeros));
    }
    EPOCH_RETURN_IF_ERROR((*file)->Sync());
  }
  for (const std::string& path : plan.moved_aside) {
    EPOCH_RETURN_IF_ERROR(fs.Rename(path, path + ".broken"));
  }
  EPOCH_RETURN_IF_ERROR(fs.SyncDir(dir));
  lock->reset();
  auto after = Inspect(fs, dir);
  if (!after.ok()) return after.status();
  if (!after->status.ok()) return after->status.Annotate("still damaged after repair");
  return Status::Ok();
}

}  // namespace epoch::wal
