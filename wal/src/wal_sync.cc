// wal::Wal background threads: the sync thread (group commit, rollover, compaction, fail-stop),
// the completion thread (runs durability callbacks) and the preallocator (creates the next
// segment ahead of need). See wal/FORMAT.md §2 and §7.
//
// Order of work for one batch, on the sync thread (or, with Options::manual_sync, on the thread
// that calls SyncPending):
//   take everything pending (one batch) -> roll over if the frame does not fit -> one pwrite ->
//   one fdatasync -> record where the entries landed -> hand the callbacks to the completion
//   thread -> compaction (if the batch held a snapshot record) -> the next batch.
// The completion thread runs the handed-over callbacks in order, concurrently with the next
// batch's write and fdatasync.
#include <fmt/format.h>

#include <chrono>

#include "wal_internal.h"

namespace epoch::wal {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kZeroChunkBytes = 1u << 20;

}  // namespace

void Wal::SyncLoop() {
  for (;;) {
    std::unique_ptr<Pending> fresh = RecycledPending();  // outside mu_: may allocate
    std::unique_ptr<Pending> batch;
    Status status;
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return closing_ || !pending_->Empty(); });
      if (pending_->Empty()) return;  // closing, and everything queued is done
      batch = std::exchange(pending_, std::move(fresh));
      batch->state_after = model_->MakeCheckpoint();
      stats_.pending_bytes = 0;
      status = failed_;
    }
    WriteBatch(std::move(batch), std::move(status));
  }
}

bool Wal::SyncPending() {
  std::unique_ptr<Pending> fresh = RecycledPending();
  std::unique_ptr<Pending> batch;
  Status status;
  {
    std::lock_guard lock(mu_);
    if (pending_->Empty()) {
      spare_ = std::move(fresh);
      return false;
    }
    batch = std::exchange(pending_, std::move(fresh));
    batch->state_after = model_->MakeCheckpoint();
    stats_.pending_bytes = 0;
    status = failed_;
  }
  WriteBatch(std::move(batch), std::move(status));
  return true;
}

bool Wal::HasPending() const {
  std::lock_guard lock(mu_);
  return !pending_->Empty();
}

void Wal::WriteBatch(std::unique_ptr<Pending> batch, Status status) {
  if (status.ok() && batch->record_count > 0) {
    status = WriteFrame(*batch);
    if (!status.ok()) {
      FailStop(status);
      status = Health();
    }
  }
  if (status.ok()) {
    // Before the callbacks, so that a caller who saw its callback also sees the stats.
    std::lock_guard lock(mu_);
    stats_.requests += batch->callbacks.size();
    stats_.max_frame_requests =
        std::max<std::uint64_t>(stats_.max_frame_requests, batch->callbacks.size());
  }
  // Only now, after the fdatasync returned (or the WAL failed), may the callbacks run.
  Complete(std::move(batch->callbacks), status);
  const std::optional<LogIndex> snapshot_index = batch->snapshot_index;
  batch->Reset();
  spare_ = std::move(batch);
  if (status.ok() && snapshot_index) CompactSegments(*snapshot_index);
}

std::unique_ptr<Wal::Pending> Wal::RecycledPending() {
  // Reuse the last batch's buffers (no allocation, no page faults for the next frame), unless
  // an unusually large batch left them oversized.
  constexpr std::size_t kKeepCapacityBytes = 8u << 20;
  if (spare_ != nullptr && spare_->records.capacity() <= kKeepCapacityBytes) {
    return std::move(spare_);
  }
  spare_.reset();
  return std::make_unique<Pending>();
}

void Wal::Complete(std::vector<DurableCallback> callbacks, const Status& status) {
  if (callbacks.empty()) return;
  if (options_.inline_callbacks) {
    for (DurableCallback& done : callbacks) {
      if (done) done(status);
    }
    return;
  }
  std::lock_guard lock(completion_->mu);
  completion_->ready.push_back(Completion::Batch{std::move(callbacks), status});
  completion_->cv.notify_one();
}

void Wal::CompletionLoop() {
  Completion& c = *completion_;
  std::deque<Completion::Batch> batches;
  for (;;) {
    {
      std::unique_lock lock(c.mu);
      c.cv.wait(lock, [&] { return c.stop || !c.ready.empty(); });
      if (c.ready.empty()) return;  // stopped, and every batch handed over has been completed
      batches.swap(c.ready);        // everything ready, in one pass
    }
    for (Completion::Batch& batch : batches) {
      for (DurableCallback& done : batch.callbacks) {
        if (done) done(batch.status);
      }
    }
    batches.clear();
  }
}

Status Wal::WriteFrame(Pending& batch) {
  if (current_has_frames_ &&
      current_offset_ + format::FrameBytes(batch.PayloadBytes()) > options_.segment_bytes) {
    EPOCH_RETURN_IF_ERROR(Rollover());
  }
  // The frame is built in place in batch.records, which starts with room for its header.
  std::string& frame = batch.records;
  std::uint32_t record_count = batch.record_count;
  std::uint64_t checkpoint_bytes = 0;
  if (!current_has_frames_) {
    // The first frame of a segment starts with a checkpoint: the log as of the previous
    // segment's end (FORMAT.md §5), so older segments can be deleted and boundaries
    // cross-checked. Once per segment, so the copy this costs does not matter.
    std::string with_checkpoint(format::kFrameHeaderBytes, '\0');
    format::AppendCheckpointRecord(&with_checkpoint, written_state_);
    checkpoint_bytes = with_checkpoint.size() - format::kFrameHeaderBytes;
    with_checkpoint.append(frame, format::kFrameHeaderBytes);
    frame.swap(with_checkpoint);
    ++record_count;
  }
  // Where batch.records' own payload (and so every Placement offset) starts in the file.
  const std::uint64_t payload_base = current_offset_ + format::kFrameHeaderBytes + checkpoint_bytes;
  const std::uint64_t payload_bytes = frame.size() - format::kFrameHeaderBytes;
  frame.resize(format::FrameBytes(payload_bytes), '\0');
  const std::string header = format::EncodeFrameHeader(
      current_seq_, current_offset_, record_count,
      std::string_view(frame).substr(format::kFrameHeaderBytes, payload_bytes));
  frame.replace(0, header.size(), header);

  // One write, one fdatasync: the whole batch becomes durable (or, after a crash, is rejected
  // by its checksum) as a unit.
  const auto t0 = Clock::now();
  EPOCH_RETURN_IF_ERROR(current_file_->Write(current_offset_, frame));
  const auto t1 = Clock::now();
  EPOCH_RETURN_IF_ERROR(current_file_->Sync());
  const auto t2 = Clock::now();
  if (options_.on_sync) {
    options_.on_sync(SyncEvent{t1 - t0, t2 - t1, frame.size(), record_count,
                               static_cast<std::uint32_t>(batch.callbacks.size())});
  }
  PlaceEntries(batch, payload_base, frame.size());
  current_offset_ += frame.size();
  current_has_frames_ = true;
  written_state_ = batch.state_after;
  return Status::Ok();
}

void Wal::PlaceEntries(const Pending& batch, std::uint64_t payload_base,
                       std::uint64_t frame_bytes) {
  std::lock_guard lock(mu_);
  stats_.frames++;
  stats_.frame_bytes += frame_bytes;
  stats_.records += batch.record_count;
  Segment& seg = *segments_.at(current_seq_);
  if (batch.max_entry_index > seg.max_entry_index) seg.max_entry_index = batch.max_entry_index;
  for (const Placement& p : batch.placements) {
    Slot* slot = model_->Find(p.index);
    // A later request may already have truncated (and replaced) this entry: then the slot
    // belongs to another request and keeps its own placement.
    if (slot == nullptr || slot->op_seq != p.op_seq) continue;
    slot->segment = current_seq_;
    slot->offset = payload_base + p.offset;
    slot->record_bytes = p.bytes;
  }
  model_->EvictTo(options_.cache_bytes_max);
}

Status Wal::Rollover() {
  const std::uint64_t next = current_seq_ + 1;
  auto prepared = TakePrealloc(next);
  if (!prepared.ok()) return prepared.status().Annotate("prepare next segment");
  prepared->reset();
  EPOCH_RETURN_IF_ERROR(InstallSegment(next));
  const std::string path = JoinPath(dir_, format::SegmentFileName(next));
  auto file = fs_.Open(path, OpenMode::kReadWrite);
  if (!file.ok()) return file.status();
  current_file_ = std::shared_ptr<File>(std::move(file).value());
  current_seq_ = next;
  current_offset_ = format::kSegmentHeaderBytes;
  current_has_frames_ = false;
  {
    std::lock_guard lock(mu_);
    segments_[next] = std::make_shared<Segment>(Segment{next, path, current_file_, LogIndex(0)});
    stats_.rollovers++;
  }
  RequestPrealloc(next + 1);
  return Status::Ok();
}

Status Wal::InstallSegment(std::uint64_t seq) {
  // The name must be durable before anything is written into the segment: otherwise a crash
  // could keep the data and lose the file (ALICE's most common bug: no directory fsync).
  EPOCH_RETURN_IF_ERROR(fs_.Rename(JoinPath(dir_, format::PreallocFileName(seq)),
                                   JoinPath(dir_, format::SegmentFileName(seq))));
  return fs_.SyncDir(dir_);
}

void Wal::CompactSegments(LogIndex snapshot_index) {
  // A segment may go once every entry it held is covered by the durable snapshot and its
  // successor's checkpoint (which carries hard state and snapshot) is durable. Oldest first, so
  // the remaining sequence numbers stay consecutive whatever a crash keeps (FORMAT.md §7).
  const std::uint64_t limit = current_has_frames_ ? current_seq_ : current_seq_ - 1;
  std::vector<std::shared_ptr<Segment>> doomed;
  {
    std::lock_guard lock(mu_);
    while (!segments_.empty()) {
      const auto it = segments_.begin();
      if (it->first >= limit || it->second->max_entry_index > snapshot_index) break;
      doomed.push_back(it->second);
      segments_.erase(it);
    }
  }
  for (const auto& seg : doomed) {
    if (Status s = fs_.Remove(seg->path); !s.ok()) {
      // Harmless for correctness: an old segment replays consistently. Stop to keep the
      // sequence contiguous; the next open or compaction will see it again.
      Log(LogLevel::kWarning, fmt::format("could not delete compacted segment: {}", s.ToString()));
      return;
    }
    // Each deletion is made durable before the next one. Unsynced directory operations need
    // not reach the disk in order (POSIX promises nothing; btrfs can reorder them): had the
    // deletion of segment 3 survived a power loss and that of segment 2 not, recovery would
    // find a gap and refuse to open (FORMAT.md §7). One directory fsync per 64 MiB segment.
    if (Status s = fs_.SyncDir(dir_); !s.ok()) {
      FailStop(s.Annotate("fsync directory after deleting a compacted segment"));
      return;
    }
    std::lock_guard lock(mu_);
    stats_.segments_removed++;
  }
}

void Wal::FailStop(const Status& error) {
  std::lock_guard lock(mu_);
  if (!failed_.ok()) return;
  // Never retried (fsyncgate): the data may or may not be on disk, so the state is unknown.
  failed_ = error.Annotate("wal failed (fail-stop, not retried)");
  Log(LogLevel::kError, failed_.ToString());
}

void Wal::PreallocLoop() {
  Prealloc& p = *prealloc_;
  for (;;) {
    std::uint64_t seq = 0;
    {
      std::unique_lock lock(p.mu);
      p.cv.wait(lock, [&] { return p.stop || p.requested.has_value(); });
      if (p.stop) return;
      seq = *p.requested;
      p.requested.reset();
    }
    auto file = CreateSegmentFile(seq);
    std::lock_guard lock(p.mu);
    p.has_ready = true;
    p.ready_seq = seq;
    p.ready_status = file.status();
    p.ready_file = file.ok() ? std::move(file).value() : nullptr;
    p.cv.notify_all();
  }
}

void Wal::RequestPrealloc(std::uint64_t seq) {
  if (options_.manual_sync) return;  // TakePrealloc creates it when it is needed
  std::lock_guard lock(prealloc_->mu);
  prealloc_->requested = seq;
  prealloc_->cv.notify_all();
}

Result<std::unique_ptr<File>> Wal::TakePrealloc(std::uint64_t seq) {
  if (options_.manual_sync) return CreateSegmentFile(seq);
  Prealloc& p = *prealloc_;
  std::unique_lock lock(p.mu);
  const auto ready = [&] { return p.has_ready && p.ready_seq == seq; };
  if (!ready()) {
    {
      std::lock_guard stats_lock(mu_);
      stats_.prealloc_waits++;
    }
    p.cv.wait(lock, [&] { return p.stop || ready(); });
    if (!ready()) return Status::Aborted("wal is closing");
  }
  p.has_ready = false;
  if (!p.ready_status.ok()) return p.ready_status;
  return std::move(p.ready_file);
}

Result<std::unique_ptr<File>> Wal::CreateSegmentFile(std::uint64_t seq) {
  const std::string path = JoinPath(dir_, format::PreallocFileName(seq));
  if (fs_.Exists(path)) EPOCH_RETURN_IF_ERROR(fs_.Remove(path));
  auto opened = fs_.Open(path, OpenMode::kCreateExclusive);
  if (!opened.ok()) return opened.status();
  std::unique_ptr<File> file = std::move(opened).value();
  EPOCH_RETURN_IF_ERROR(file->Write(0, format::EncodeSegmentHeader(seq)));
  if (options_.prealloc_mode == PreallocMode::kZeroFill) {
    const std::string zeros(kZeroChunkBytes, '\0');
    for (std::uint64_t at = format::kSegmentHeaderBytes; at < options_.segment_bytes;) {
      {
        std::lock_guard lock(prealloc_->mu);
        if (prealloc_->stop) return Status::Aborted("wal is closing");
      }
      const std::uint64_t n = std::min<std::uint64_t>(zeros.size(), options_.segment_bytes - at);
      EPOCH_RETURN_IF_ERROR(file->Write(at, std::string_view(zeros).substr(0, n)));
      at += n;
    }
  } else {
    EPOCH_RETURN_IF_ERROR(file->Allocate(options_.segment_bytes));
  }
  EPOCH_RETURN_IF_ERROR(file->Sync());
  return file;
}

}  // namespace epoch::wal
