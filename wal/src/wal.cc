// wal::Wal: opening and recovery, accepting requests, and the LogReader reads. The sync and
// preallocator threads are in wal_sync.cc.
#include "epoch/wal/wal.h"

#include <fmt/format.h>

#include <algorithm>

#include "epoch/thread_name.h"
#include "recovery.h"
#include "wal_internal.h"

namespace epoch::wal {

namespace {

std::string_view LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kError: return "ERROR";
    case LogLevel::kWarning: return "WARN";
    case LogLevel::kNotice: return "NOTICE";
  }
  return "?";
}

std::string ParentDir(const std::string& dir) {
  const auto slash = dir.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : dir.substr(0, slash);
}

}  // namespace

Wal::Wal(FileSystem& fs, std::string dir, Options options)
    : fs_(fs),
      dir_(std::move(dir)),
      options_(std::move(options)),
      model_(std::make_unique<LogModel>()),
      pending_(std::make_unique<Pending>()),
      prealloc_(std::make_unique<Prealloc>()),
      completion_(std::make_unique<Completion>()) {}

Wal::~Wal() { (void)Close(); }

Result<std::unique_ptr<Wal>> Wal::Open(FileSystem& fs, std::string dir, Options options) {
  if (options.segment_bytes < format::kSegmentHeaderBytes + format::kFrameHeaderBytes) {
    return Status::InvalidArgument("segment_bytes is too small");
  }
  if (options.manual_sync) options.inline_callbacks = true;  // there is no completion thread
  std::unique_ptr<Wal> wal(new Wal(fs, std::move(dir), std::move(options)));
  EPOCH_RETURN_IF_ERROR(wal->Recover());
  if (wal->options_.manual_sync) return wal;  // no threads: SyncPending does the work
  wal->prealloc_thread_ = std::thread([w = wal.get()] {
    SetThreadName("wal-prealloc");
    w->PreallocLoop();
  });
  wal->RequestPrealloc(wal->current_seq_ + 1);
  if (!wal->options_.inline_callbacks) {
    wal->completion_thread_ = std::thread([w = wal.get()] {
      SetThreadName("wal-complete");
      w->CompletionLoop();
    });
  }
  wal->sync_thread_ = std::thread([w = wal.get()] {
    SetThreadName("wal-sync");
    w->SyncLoop();
  });
  return wal;
}

void Wal::Log(LogLevel level, std::string_view message) const {
  if (options_.log) {
    options_.log(level, message);
  } else {
    fmt::print(stderr, "wal {}: {}\n", LevelName(level), message);
  }
}

Status Wal::Recover() {
  EPOCH_RETURN_IF_ERROR(fs_.CreateDir(dir_));
  auto lock = fs_.Lock(JoinPath(dir_, format::kLockFileName));
  if (!lock.ok()) return lock.status().Annotate("open wal");
  lock_ = std::move(lock).value();
  auto listing = ListWalDir(fs_, dir_);
  if (!listing.ok()) return listing.status().Annotate("open wal");
  for (const std::string& name : listing->prealloc_files) {
    EPOCH_RETURN_IF_ERROR(fs_.Remove(JoinPath(dir_, name)));
  }

  if (listing->segments.empty()) {
    // A new WAL: the first segment, made durable (file, its name, the directory's name).
    auto file = CreateSegmentFile(1);
    if (!file.ok()) return file.status().Annotate("create wal");
    file->reset();
    EPOCH_RETURN_IF_ERROR(InstallSegment(1));
    EPOCH_RETURN_IF_ERROR(fs_.SyncDir(ParentDir(dir_)));
    listing->segments.push_back(1);
  }

  RecoveryResult r = RecoverLog(fs_, dir_, listing->segments, options_.cache_bytes_max);
  for (const std::string& w : r.warnings) Log(LogLevel::kWarning, w);
  if (!r.status.ok()) return r.status;
  recovery_.segments = r.segments.size();
  recovery_.warnings = r.warnings;

  for (const RecoveredSegment& seg : r.segments) {
    const bool last = seg.seq == r.segments.back().seq;
    auto file = fs_.Open(seg.path, last ? OpenMode::kReadWrite : OpenMode::kRead);
    if (!file.ok()) return file.status().Annotate("open wal");
    segments_[seg.seq] = std::make_shared<Segment>(Segment{
        seg.seq, seg.path, std::shared_ptr<File>(std::move(file).value()), seg.max_entry_index});
  }
  const RecoveredSegment& last = r.segments.back();
  current_seq_ = last.seq;
  current_offset_ = last.end_offset;
  current_has_frames_ = last.frames > 0;
  current_file_ = segments_[last.seq]->file;

  if (r.torn) {
    // Zero the torn frame so that no stale bytes can later be mistaken for data (FORMAT.md §2).
    const std::string zeros(std::min<std::uint64_t>(r.torn->bytes, 1u << 20), '\0');
    for (std::uint64_t done = 0; done < r.torn->bytes;) {
      const std::uint64_t n = std::min<std::uint64_t>(zeros.size(), r.torn->bytes - done);
      EPOCH_RETURN_IF_ERROR(
          current_file_->Write(r.torn->offset + done, std::string_view(zeros).substr(0, n)));
      done += n;
    }
    EPOCH_RETURN_IF_ERROR(current_file_->Sync());
    recovery_.torn_bytes_dropped = r.torn->bytes;
  }
  *model_ = std::move(r.model);
  written_state_ = model_->MakeCheckpoint();
  return Status::Ok();
}

Status Wal::Submit(std::string_view prefix, std::string_view records, std::uint32_t record_count,
                   std::vector<Placement> placements, DurableCallback done,
                   std::optional<LogIndex> snapshot_index) {
  // Caller holds mu_. Placement offsets are relative to `records`.
  Pending& p = *pending_;
  p.records.append(prefix);
  const std::uint64_t base = p.PayloadBytes();
  p.records.append(records);
  p.record_count += record_count;
  for (Placement& pl : placements) {
    pl.offset += base;
    if (pl.index > p.max_entry_index) p.max_entry_index = pl.index;
    p.placements.push_back(pl);
  }
  p.callbacks.push_back(std::move(done));
  if (snapshot_index) p.snapshot_index = snapshot_index;
  stats_.pending_bytes = p.PayloadBytes();
  work_cv_.notify_one();
  return Status::Ok();
}

Status Wal::Append(std::vector<raft::Entry> entries, std::optional<raft::HardState> hard_state,
                   DurableCallback done) {
  // Validate the request's shape and encode it before taking the lock.
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].index != entries[0].index + i) {
      return Status::InvalidArgument(fmt::format("entries are not contiguous: {} follows {}",
                                                 entries[i].index, entries[0].index + (i - 1)));
    }
    if (entries[i].data.size() > options_.entry_bytes_max) {
      return Status::InvalidArgument(fmt::format("entry {} has {} bytes, more than {}",
                                                 entries[i].index, entries[i].data.size(),
                                                 options_.entry_bytes_max));
    }
  }
  std::string encoded;
  std::vector<Placement> placements;
  placements.reserve(entries.size());
  for (const raft::Entry& e : entries) {
    const std::uint64_t at = encoded.size();
    format::AppendEntryRecord(&encoded, e);
    placements.push_back(
        Placement{e.index, 0, at, static_cast<std::uint32_t>(encoded.size() - at)});
  }
  if (hard_state) format::AppendHardStateRecord(&encoded, *hard_state);
  const auto record_count =
      static_cast<std::uint32_t>(entries.size() + (hard_state.has_value() ? 1 : 0));

  std::lock_guard lock(mu_);
  if (closing_) return Status::FailedPrecondition("wal is closed");
  if (!failed_.ok()) return Submit({}, {}, 0, {}, std::move(done), std::nullopt);
  std::string truncate;
  if (!entries.empty()) {
    const LogIndex first = entries[0].index;
    if (first <= model_->snapshot().index) {
      return Status::InvalidArgument(fmt::format("entry {} is covered by the snapshot at {}", first,
                                                 model_->snapshot().index));
    }
    if (first > model_->LastIndex() + 1) {
      return Status::InvalidArgument(fmt::format(
          "entry {} would leave a gap after the last index {}", first, model_->LastIndex()));
    }
    if (first <= model_->LastIndex()) {
      // Raft §5.3: delete the conflicting entry and all that follow it. The truncate record goes
      // in front of the new entries, in the same frame.
      format::AppendTruncateRecord(&truncate, first);
      const Status s = model_->ApplyTruncate(first);
      EPOCH_WAL_CHECK(s.ok(), "{}", s.ToString());
    }
  }
  const std::uint64_t op_seq = next_op_seq_++;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    raft::Entry& e = entries[i];
    placements[i].op_seq = op_seq;
    const std::uint64_t data_bytes = e.data.size();
    const Status s =
        model_->ApplyEntry(e.index, Slot{e.term, e.type, op_seq, 0, 0, placements[i].bytes,
                                         data_bytes, true, std::move(e.data)});
    EPOCH_WAL_CHECK(s.ok(), "{}", s.ToString());
  }
  if (hard_state) model_->ApplyHardState(*hard_state);
  const std::uint32_t truncate_count = truncate.empty() ? 0 : 1;
  return Submit(truncate, encoded, record_count + truncate_count, std::move(placements),
                std::move(done), std::nullopt);
}

Status Wal::SaveHardState(const raft::HardState& hard_state, DurableCallback done) {
  return Append({}, hard_state, std::move(done));
}

Status Wal::SaveSnapshot(const raft::SnapshotMeta& meta, DurableCallback done) {
  return SubmitSnapshot(meta, /*force_discard=*/false, std::move(done));
}

Status Wal::InstallSnapshot(const raft::SnapshotMeta& meta, DurableCallback done) {
  return SubmitSnapshot(meta, /*force_discard=*/true, std::move(done));
}

Status Wal::SubmitSnapshot(const raft::SnapshotMeta& meta, bool force_discard,
                           DurableCallback done) {
  std::lock_guard lock(mu_);
  if (closing_) return Status::FailedPrecondition("wal is closed");
  if (!failed_.ok()) return Submit({}, {}, 0, {}, std::move(done), std::nullopt);
  if (meta.index < model_->snapshot().index) {
    return Status::InvalidArgument(fmt::format("snapshot {} is older than the current one at {}",
                                               meta.index, model_->snapshot().index));
  }
  // Raft §7: keep the log after the snapshot only if it holds meta.index with meta.term.
  const format::SnapshotRecord record{meta, force_discard || !model_->SnapshotMatchesLog(meta)};
  std::string encoded;
  format::AppendSnapshotRecord(&encoded, record);
  const Status s = model_->ApplySnapshot(record);
  EPOCH_WAL_CHECK(s.ok(), "{}", s.ToString());
  return Submit({}, encoded, 1, {}, std::move(done), meta.index);
}

void Wal::Sync(DurableCallback done) {
  std::unique_lock lock(mu_);
  if (closing_) {
    lock.unlock();
    done(Status::FailedPrecondition("wal is closed"));
    return;
  }
  (void)Submit({}, {}, 0, {}, std::move(done), std::nullopt);
}

Status Wal::Close() {
  {
    std::lock_guard lock(mu_);
    if (closed_) return failed_;
    closing_ = true;
    work_cv_.notify_all();
  }
  if (sync_thread_.joinable()) sync_thread_.join();  // drains what is queued first
  if (options_.manual_sync) {
    while (SyncPending()) {
    }
  }
  {
    // The sync thread has handed over every batch: the completion thread runs the last
    // callbacks, then exits.
    std::lock_guard lock(completion_->mu);
    completion_->stop = true;
    completion_->cv.notify_all();
  }
  if (completion_thread_.joinable()) completion_thread_.join();
  {
    std::lock_guard lock(prealloc_->mu);
    prealloc_->stop = true;
    prealloc_->cv.notify_all();
  }
  if (prealloc_thread_.joinable()) prealloc_thread_.join();
  std::lock_guard lock(mu_);
  closed_ = true;
  segments_.clear();
  current_file_.reset();
  prealloc_->ready_file.reset();
  lock_.reset();
  return failed_;
}

Status Wal::Health() const {
  std::lock_guard lock(mu_);
  return failed_;
}

WalStats Wal::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

raft::HardState Wal::InitialHardState() const {
  std::lock_guard lock(mu_);
  return model_->hard_state();
}

raft::SnapshotMeta Wal::LastSnapshot() const {
  std::lock_guard lock(mu_);
  return model_->snapshot();
}

LogIndex Wal::FirstIndex() const {
  std::lock_guard lock(mu_);
  return model_->FirstIndex();
}

LogIndex Wal::LastIndex() const {
  std::lock_guard lock(mu_);
  return model_->LastIndex();
}

std::optional<Term> Wal::TermAt(LogIndex index) const {
  std::lock_guard lock(mu_);
  if (index + 1 == model_->FirstIndex()) return model_->snapshot().term;
  if (const Slot* slot = model_->Find(index)) return slot->term;
  return std::nullopt;
}

std::vector<raft::Entry> Wal::Entries(LogIndex lo, LogIndex hi, std::uint64_t max_bytes) const {
  auto entries = TryEntries(lo, hi, max_bytes);
  if (!entries.ok()) {
    // log_reader.h: a node that cannot read its own log cannot take part in the protocol.
    Log(LogLevel::kError, fmt::format("cannot read entries [{}, {}): {}; stopping", lo, hi,
                                      entries.status().ToString()));
    std::abort();
  }
  return std::move(entries).value();
}

Result<std::vector<raft::Entry>> Wal::TryEntries(LogIndex lo, LogIndex hi,
                                                 std::uint64_t max_bytes) const {
  struct DiskRead {
    std::size_t position;
    std::shared_ptr<File> file;
    std::uint64_t offset;
    std::uint32_t bytes;
    std::string path;
  };
  std::vector<raft::Entry> out;
  std::vector<DiskRead> reads;
  {
    std::lock_guard lock(mu_);
    if (lo < model_->FirstIndex() || lo > hi || hi > model_->LastIndex() + 1) {
      return Status::InvalidArgument(fmt::format("entries [{}, {}) outside the log [{}, {}]", lo,
                                                 hi, model_->FirstIndex(), model_->LastIndex()));
    }
    std::uint64_t total = 0;
    for (LogIndex i = lo; i < hi; ++i) {
      const Slot& slot = *model_->Find(i);
      if (!out.empty() && total + slot.data_bytes > max_bytes) break;
      total += slot.data_bytes;
      out.push_back(raft::Entry{slot.term, i, slot.type, slot.cached ? slot.data : std::string()});
      if (!slot.cached) {
        const auto seg = segments_.find(slot.segment);
        EPOCH_WAL_CHECK(seg != segments_.end(), "entry {} is in segment {}, which is gone", i,
                        slot.segment);
        reads.push_back(DiskRead{out.size() - 1, seg->second->file, slot.offset, slot.record_bytes,
                                 seg->second->path});
      }
    }
    stats_.disk_reads += reads.size();
  }
  // Read evicted entries outside the lock; the shared_ptr keeps each file open.
  for (const DiskRead& r : reads) {
    std::string buf(r.bytes, '\0');
    auto n = r.file->Read(r.offset, r.bytes, buf.data());
    if (!n.ok()) return n.status();
    raft::Entry& want = out[r.position];
    auto rec = format::DecodeRecord(std::string_view(buf.data(), *n), 0);
    const raft::Entry* got = rec.ok() ? std::get_if<raft::Entry>(&rec->body) : nullptr;
    if (got == nullptr || got->index != want.index || got->term != want.term) {
      return Status::Corruption(
          fmt::format("entry {} in {} at offset {} does not read back: {}", want.index, r.path,
                      r.offset, rec.ok() ? "different record" : rec.status().message()));
    }
    want.type = got->type;
    want.data = got->data;
  }
  return out;
}

}  // namespace epoch::wal
