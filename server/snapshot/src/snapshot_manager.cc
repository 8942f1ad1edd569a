#include "epoch/snapshot/snapshot_manager.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "epoch/etcd_errors.h"
#include "epoch/peer/peer_codec.h"
#include "epoch/raft/conf_change.h"
#include "epoch/snapshot/snapshot_io.h"

namespace epoch::server {
namespace {

constexpr auto kHousekeepingPeriod = std::chrono::milliseconds(200);

std::int64_t UnixMillisNow() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

SnapshotManager::SnapshotManager(SnapshotOptions options, NodeId self, std::uint64_t cluster_id,
                                 std::string root, KvStore& store, DurableLog& log,
                                 RaftDriver& driver, asio::io_context& io, FrameSender send_frame,
                                 PeerDrops* drops)
    : options_(std::move(options)),
      self_(self),
      cluster_id_(cluster_id),
      root_(std::move(root)),
      store_(store),
      log_(log),
      driver_(driver),
      send_frame_(std::move(send_frame)),
      drops_(drops),
      io_(io),
      housekeeping_(io_),
      conf_(log.LastSnapshot().conf),
      checkpoints_(root_, store),
      assembler_(root_) {}

SnapshotManager::~SnapshotManager() { Stop(); }

Status SnapshotManager::Start() {
  EPOCH_RETURN_IF_ERROR(snapshot_io::RemoveAll(root_));
  std::error_code ec;
  std::filesystem::create_directories(root_, ec);
  if (ec) return Status::IOError(fmt::format("create {}: {}", root_, ec.message()));
  running_ = true;
  asio::post(io_, [this] { ScheduleHousekeeping(); });
  return Status::Ok();
}

void SnapshotManager::Stop() {
  if (!running_.exchange(false)) return;
  // The I/O loop has stopped: its state may be touched here. Abandoned transfers are not reported
  // (the driver is stopping); the receivers time them out.
  outgoing_.clear();
  std::lock_guard lock(mu_);
  for (const auto& [key, dir] : ready_images_) (void)snapshot_io::RemoveAll(dir);
  ready_images_.clear();
}

SnapshotStats SnapshotManager::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

// ---------------------------------------------------------------------------------------------
// Leader side

void SnapshotManager::SendSnapshot(const raft::Message& message) {
  if (!message.snapshot) return;
  {
    std::lock_guard lock(mu_);
    // The running transfer's ReportSnapshot answers this request too (raft/DESIGN.md §2: the
    // core sends nothing else to a peer in the snapshot state until that report).
    if (!sending_.insert(message.to).second) return;
  }
  // The checkpoint flushes the memtables: on the I/O thread, while the strand goes on.
  asio::post(io_, [this, envelope = message]() mutable { PrepareTransfer(std::move(envelope)); });
}

void SnapshotManager::PrepareTransfer(raft::Message envelope) {
  const raft::SnapshotMeta& meta = *envelope.snapshot;
  Result<std::shared_ptr<const Checkpoint>> checkpoint = checkpoints_.Acquire(meta.index);
  if (!checkpoint.ok()) {
    return FailTransferNow(envelope.to, checkpoint.status().ToString());
  }
  // The image may be newer than the snapshot index (the follower skips the entries it already
  // holds); never older — except the empty bootstrap image, which is the state at index 1.
  if ((*checkpoint)->applied < meta.index && meta.index > raft::kBootstrapIndex) {
    return FailTransferNow(envelope.to,
                           fmt::format("checkpoint at {} is older than the snapshot at {}",
                                       (*checkpoint)->applied, meta.index));
  }
  {
    std::lock_guard lock(mu_);
    stats_.checkpoints = checkpoints_.created();
  }
  StartTransfer(std::move(envelope), std::move(*checkpoint));
}

void SnapshotManager::FailTransferNow(NodeId peer, const std::string& reason) {
  spdlog::error("node={:x} snapshot to {:x} not started: {}", self_, peer, reason);
  {
    std::lock_guard lock(mu_);
    sending_.erase(peer);
    ++stats_.send_failed;
  }
  driver_.ReportSnapshot(peer, false);
}

void SnapshotManager::StartTransfer(raft::Message envelope,
                                    std::shared_ptr<const Checkpoint> checkpoint) {
  const NodeId peer = envelope.to;
  const std::uint64_t id = next_transfer_id_.fetch_add(1);
  SPDLOG_INFO("sending snapshot node={:x} to={:x} index={} term={} applied={} files={} transfer={}",
              self_, peer, envelope.snapshot->index, envelope.snapshot->term, checkpoint->applied,
              checkpoint->files.size(), id);
  Outgoing out;
  out.started = std::chrono::steady_clock::now();
  out.sender = std::make_unique<SnapshotSender>(
      std::move(envelope), id, checkpoint->files, options_.send,
      [this, peer](std::string frame) { send_frame_(peer, std::move(frame)); }, out.started);
  out.checkpoint = std::move(checkpoint);
  outgoing_[peer] = std::move(out);
  outgoing_[peer].sender->Pump(std::chrono::steady_clock::now());
  MaybeFinish(peer);
}

void SnapshotManager::HandleAck(const raftpb::Message& message) {
  Result<SnapshotAckIn> ack = DecodeAck(message);
  if (!ack.ok()) return;
  auto it = outgoing_.find(ack->from);
  if (it == outgoing_.end() || it->second.sender->transfer_id() != ack->transfer_id) return;
  it->second.sender->OnAck(ack->received_bytes, ack->complete, ack->reject, ack->reason,
                           std::chrono::steady_clock::now());
  MaybeFinish(ack->from);
}

// Reports a finished transfer to the core, exactly once (the entry is erased here).
void SnapshotManager::MaybeFinish(NodeId peer) {
  auto it = outgoing_.find(peer);
  if (it == outgoing_.end()) return;
  const SnapshotSender& sender = *it->second.sender;
  if (sender.state() == SnapshotSender::State::kSending) return;
  const bool ok = sender.state() == SnapshotSender::State::kSucceeded;
  const auto elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - it->second.started)
                              .count();
  if (ok) {
    SPDLOG_INFO("sent snapshot node={:x} to={:x} transfer={} bytes={} chunks={} ms={}", self_, peer,
                sender.transfer_id(), sender.total_bytes(), sender.chunks_sent(), elapsed_ms);
  } else {
    SPDLOG_WARN("snapshot send failed node={:x} to={:x} transfer={} ms={} error={:?}", self_, peer,
                sender.transfer_id(), elapsed_ms, sender.error());
  }
  outgoing_.erase(it);  // releases the checkpoint
  {
    std::lock_guard lock(mu_);
    sending_.erase(peer);
    ++(ok ? stats_.sent : stats_.send_failed);
  }
  driver_.ReportSnapshot(peer, ok);
}

void SnapshotManager::ScheduleHousekeeping() {
  housekeeping_.expires_after(kHousekeepingPeriod);
  housekeeping_.async_wait([this](std::error_code ec) {
    if (ec || !running_) return;
    const SteadyTime now = std::chrono::steady_clock::now();
    std::vector<NodeId> peers;
    for (auto& [peer, out] : outgoing_) {
      out.sender->CheckTimeout(now);
      peers.push_back(peer);
    }
    for (NodeId peer : peers) MaybeFinish(peer);
    if (assembler_.ExpireIdle(now, options_.receive_idle_timeout)) {
      spdlog::warn("node={:x} discarded an incoming snapshot: no chunk for {} ms", self_,
                   options_.receive_idle_timeout.count());
    }
    ScheduleHousekeeping();
  });
}

// ---------------------------------------------------------------------------------------------
// Follower side

void SnapshotManager::HandleFrame(raftpb::Message message) {
  if (!running_) return;
  asio::post(io_, [this, message = std::move(message)] {
    if (message.type() == raftpb::INSTALL_SNAPSHOT) {
      HandleChunk(message);
    } else {
      HandleAck(message);
    }
  });
}

void SnapshotManager::HandleChunk(const raftpb::Message& message) {
  Result<SnapshotChunkIn> chunk = DecodeChunk(message);
  if (!chunk.ok()) {
    spdlog::warn("node={:x} dropping a snapshot frame: {}", self_, chunk.status().ToString());
    return;
  }
  const DriverStatus status = driver_.status();
  if (chunk->from != status.leader || chunk->term != status.term) {
    // Only the leader this node follows, in its term, may replace the state machine.
    if (drops_) drops_->Count(FrameDrop::kSnapshotNotLeader);
    // A flood of such chunks must not flood the log: the 1st, 2nd, 4th, 8th, ... are logged.
    const std::uint64_t n = ++chunks_refused_;
    if ((n & (n - 1)) == 0) {
      spdlog::warn(
          "node={:x} refusing snapshot chunk of transfer {} from {:x} at term {}: the leader of "
          "term {} is {:x}",
          self_, chunk->transfer_id, chunk->from, chunk->term, status.term, status.leader);
    }
    ChunkAck refused{ChunkVerdict::kStale, 0, false, "not from the leader of the current term"};
    send_frame_(chunk->from, EncodeAckFrame(self_, chunk->from, chunk->transfer_id, refused));
    return;
  }
  ChunkAck ack = assembler_.Add(*chunk, std::chrono::steady_clock::now());
  if (ack.no_space && drops_) drops_->Count(FrameDrop::kSnapshotNoSpace);
  if (ack.verdict == ChunkVerdict::kAborted || ack.verdict == ChunkVerdict::kStale) {
    spdlog::warn("node={:x} snapshot chunk of transfer {} from {:x} refused ({}): {}", self_,
                 chunk->transfer_id, chunk->from, ChunkVerdictName(ack.verdict), ack.error);
  }
  send_frame_(chunk->from, EncodeAckFrame(self_, chunk->from, chunk->transfer_id, ack));
  if (ack.verdict != ChunkVerdict::kComplete) return;
  std::optional<AssembledSnapshot> image = assembler_.TakeCompleted();
  if (image) KeepReadyImage(*image, message);
}

void SnapshotManager::KeepReadyImage(const AssembledSnapshot& image,
                                     const raftpb::Message& envelope) {
  Result<raft::Message> install = DecodeMessage(envelope);
  if (!install.ok()) {
    (void)snapshot_io::RemoveAll(image.dir);
    return;
  }
  SPDLOG_INFO("received snapshot node={:x} from={:x} index={} term={} transfer={}", self_,
              image.from, image.meta.index, image.meta.term, image.transfer_id);
  {
    std::lock_guard lock(mu_);
    const ImageKey key{image.meta.index, image.meta.term};
    auto [it, inserted] = ready_images_.try_emplace(key, image.dir);
    if (!inserted) {  // the same snapshot again: keep the newer copy
      (void)snapshot_io::RemoveAll(it->second);
      it->second = image.dir;
    }
    while (ready_images_.size() > kReadyImagesMax) {
      (void)snapshot_io::RemoveAll(ready_images_.begin()->second);
      ready_images_.erase(ready_images_.begin());
    }
    ++stats_.received;
  }
  // The core sees the InstallSnapshot only now that the image is on disk (raft/DESIGN.md §5).
  driver_.Receive(std::move(*install));
}

Status SnapshotManager::InstallSnapshot(const raft::SnapshotMeta& meta) {
  std::optional<std::string> image;
  {
    std::lock_guard lock(mu_);
    auto it = ready_images_.find(ImageKey{meta.index, meta.term});
    if (it != ready_images_.end()) {
      image = std::move(it->second);
      ready_images_.erase(it);
    }
    // Images at or below this one are obsolete now; newer ones may still be asked for.
    while (!ready_images_.empty() && ready_images_.begin()->first.first <= meta.index) {
      (void)snapshot_io::RemoveAll(ready_images_.begin()->second);
      ready_images_.erase(ready_images_.begin());
    }
  }
  if (!image) {
    // Installing the meta without its image would apply later entries to an older state.
    return Status::FailedPrecondition(
        fmt::format("the core installs snapshot {}/t{} but no received image matches it",
                    meta.index, meta.term));
  }
  Status replaced = store_.ReplaceWithCheckpoint(*image);
  (void)snapshot_io::RemoveAll(*image);
  if (!replaced.ok()) return replaced.Annotate("install snapshot image");
  if (store_.AppliedIndex() < meta.index) {
    // Only the empty bootstrap image may be behind its meta (it is the state at index 1).
    if (meta.index > raft::kBootstrapIndex) {
      return Status::Corruption(fmt::format("snapshot image applied {} is behind its meta {}",
                                            store_.AppliedIndex(), meta.index));
    }
    EPOCH_RETURN_IF_ERROR(store_.ApplyEmpty(meta.index));
    Result<LogIndex> flushed = store_.Flush();
    if (!flushed.ok()) return flushed.status();
  }
  SPDLOG_INFO("installed snapshot node={:x} index={} term={} applied={} revision={}", self_,
              meta.index, meta.term, store_.AppliedIndex(), store_.CurrentRevision());
  bytes_since_compaction_ = 0;
  {
    std::lock_guard lock(mu_);
    ++stats_.installed;
  }
  for (const auto& hook : on_installed_) hook(meta);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// Compaction and Maintenance.Snapshot (strand)

void SnapshotManager::AfterAdvance(const raft::Ready& ready, const raft::Node& node) {
  for (const raft::Entry& e : ready.entries) bytes_since_compaction_ += e.data.size();
  for (const raft::Entry& e : ready.committed_entries) {
    if (e.type == raft::EntryType::kConfChange) last_conf_change_ = e.index;
  }
  if (ready.conf_state || ready.snapshot) conf_ = node.conf_state();
  MaybeCompact(node);
}

void SnapshotManager::MaybeCompact(const raft::Node& node) {
  // While an archive is being prepared the log keeps every index the store has applied, so the
  // archive's header can name its term.
  if (flush_in_flight_ || archives_preparing_ > 0 || !running_) return;
  const LogIndex snapshot_index = log_.LastSnapshot().index;
  // After a restart the state machine may be ahead of the core; compact only what both applied.
  const LogIndex applied = std::min(node.applied_index(), store_.AppliedIndex());
  std::optional<LogIndex> target = CompactionTarget(
      options_.compaction,
      CompactionInput{snapshot_index, applied, bytes_since_compaction_, last_conf_change_});
  if (!target) return;
  // RocksDB's WAL is off: only flushed state survives a crash, so never drop log entries above
  // the flushed applied index (server/README.md, "Durability"). The flush waits for RocksDB to
  // write the memtables (tens of ms): it runs on the I/O thread, and the strand keeps handling
  // Readies meanwhile; the compaction itself comes back to the strand.
  flush_in_flight_ = true;
  const std::uint64_t bytes_at_start = bytes_since_compaction_;
  const raft::ConfState conf = node.conf_state();
  asio::post(io_, [this, target = *target, bytes_at_start, conf] {
    Result<LogIndex> flushed = store_.Flush();
    driver_.Post([this, target, bytes_at_start, conf, flushed = std::move(flushed)] {
      FinishCompaction(target, bytes_at_start, conf, flushed);
    });
  });
}

void SnapshotManager::FinishCompaction(LogIndex target, std::uint64_t bytes_at_start,
                                       const raft::ConfState& conf,
                                       const Result<LogIndex>& flushed) {
  flush_in_flight_ = false;
  if (!running_) return;
  if (!flushed.ok()) {
    spdlog::error("node={:x} log compaction skipped: flush failed: {}", self_,
                  flushed.status().ToString());
    return;
  }
  const LogIndex snapshot_index = log_.LastSnapshot().index;
  // A snapshot installed while the flush ran may have moved the log past the target.
  const LogIndex index = std::min(target, *flushed);
  if (index <= snapshot_index) return;
  // The membership may have changed meanwhile; the target never passes the last conf change
  // (CompactionTarget), so the conf state taken with it is the one at `index`.
  Status compacted = log_.Compact(index, conf);
  if (!compacted.ok()) {
    spdlog::error("node={:x} log compaction to {} failed: {}", self_, index, compacted.ToString());
    return;
  }
  SPDLOG_INFO("created snapshot node={:x} index={} entries-kept={} bytes-since-previous={}", self_,
              index, log_.LastIndex() - index, bytes_at_start);
  bytes_since_compaction_ -= std::min(bytes_since_compaction_, bytes_at_start);
  std::lock_guard lock(mu_);
  ++stats_.compactions;
  stats_.last_compaction = index;
}

void SnapshotManager::OpenArchive(ArchiveCallback done) {
  if (!running_) return done(etcd_errors::kStopped.ToStatus());
  // At least the state applied when the download was asked for; a newer checkpoint still in use
  // serves too.
  const LogIndex min_applied = store_.AppliedIndex();
  driver_.Post([this, min_applied, done = std::move(done)]() mutable {
    // Held until the header is written: the log keeps the checkpoint's term (see MaybeCompact).
    ++archives_preparing_;
    asio::post(io_, [this, min_applied, done = std::move(done)]() mutable {
      Result<std::shared_ptr<const Checkpoint>> checkpoint = checkpoints_.Acquire(min_applied);
      if (checkpoint.ok()) {
        std::lock_guard lock(mu_);
        stats_.checkpoints = checkpoints_.created();
      }
      driver_.Post([this, checkpoint = std::move(checkpoint), done = std::move(done)] {
        --archives_preparing_;
        FinishArchive(checkpoint, done);
      });
    });
  });
}

void SnapshotManager::FinishArchive(const Result<std::shared_ptr<const Checkpoint>>& checkpoint,
                                    const ArchiveCallback& done) {
  if (!running_) return done(etcd_errors::kStopped.ToStatus());
  if (!checkpoint.ok()) return done(checkpoint.status());
  std::optional<Term> term = log_.TermAt((*checkpoint)->applied);
  if (!term) {
    // Only an installed snapshot moves the log past an index the store has applied.
    return done(Status::Unavailable(
        fmt::format("the log moved past the checkpoint at {} (a snapshot was installed); retry",
                    (*checkpoint)->applied)));
  }
  ArchiveHeader header;
  header.applied_index = (*checkpoint)->applied;
  header.applied_term = *term;
  header.revision = (*checkpoint)->revision;
  header.cluster_id = cluster_id_;
  header.created_unix_ms = UnixMillisNow();
  header.conf = {conf_.voters, conf_.learners};
  {
    std::lock_guard lock(mu_);
    ++stats_.archives;
  }
  done(std::make_shared<SnapshotArchiveStream>(*checkpoint, std::move(header)));
}

void SnapshotManager::CountArchiveStreamCut() {
  std::lock_guard lock(mu_);
  ++stats_.archive_streams_cut;
}

void SnapshotManager::RenderMetrics(MetricsText& m) const {
  const SnapshotStats snap = stats();
  m.Counter("epoch_snapshots_sent_total", "Raft snapshots streamed to followers.", snap.sent);
  m.Counter("epoch_snapshots_send_failed_total", "Raft snapshot transfers that failed.",
            snap.send_failed);
  m.Counter("epoch_snapshots_received_total", "Raft snapshots received from the leader.",
            snap.received);
  m.Counter("epoch_snapshots_installed_total", "Received snapshots installed.", snap.installed);
  m.Counter("epoch_snapshot_streams_cut_total",
            "Maintenance.Snapshot streams ended for not reading (--snapshot-send-timeout-ms).",
            snap.archive_streams_cut);
  m.Counter("epoch_log_compactions_total", "Automatic Raft log compactions.", snap.compactions);
  m.Gauge("epoch_raft_first_index", "First index still in the Raft log.",
          log_.FirstIndex().value());
}

}  // namespace epoch::server
