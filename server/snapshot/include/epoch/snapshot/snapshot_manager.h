// SnapshotManager: everything a running node does with snapshots (server/SNAPSHOT.md).
//
//   - Leader side: for each kInstallSnapshot the core emits, take (or reuse) a RocksDB checkpoint
//     at or past the snapshot index and stream it to the peer in chunks (SnapshotSender), then
//     call RaftDriver::ReportSnapshot exactly once for that transfer. At most one transfer per
//     peer: an InstallSnapshot for a peer that is still receiving one is dropped (the running
//     transfer's report answers it).
//   - Follower side: accept chunks only from the leader of the current term (the driver's
//     status; others are refused and counted in PeerDrops, as are transfers whose announced
//     size does not fit on the disk), assemble them in a staging directory (SnapshotAssembler),
//     answer each with an acknowledgement, and once the image is complete step the InstallSnapshot
//     message into the core. When the core then hands out Ready::snapshot, InstallSnapshot()
//     swaps the image into the KvStore (before the driver persists the meta in the WAL).
//   - Automatic log compaction after each Advance (snapshot_compaction.h).
//   - Maintenance.Snapshot: a fresh checkpoint as an archive stream (snapshot_archive.h).
//
// Directory: <data-dir>/snap — checkpoints (ckpt-N) and staging directories (recv-...). It is
// emptied at start: nothing in it survives a restart.
//
// Threading: the SnapshotHooks methods run on the driver's strand (the KvStore applier thread).
// Checkpoints (a RocksDB flush), chunk reading/writing, acknowledgements and timeouts run on the
// manager's own I/O thread, so neither a transfer nor a download blocks the strand. HandleFrame,
// OpenArchive and CountArchiveStreamCut may be called from any thread.
#pragma once

#include <asio.hpp>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "epoch/metrics_text.h"
#include "epoch/peer/peer_drops.h"
#include "epoch/replication/durable_log.h"
#include "epoch/replication/raft_driver.h"
#include "epoch/snapshot/snapshot_archive.h"
#include "epoch/snapshot/snapshot_checkpoints.h"
#include "epoch/snapshot/snapshot_options.h"
#include "epoch/snapshot/snapshot_transfer.h"
#include "epoch/state/kv_store.h"
#include "raftpb/raft.pb.h"

namespace epoch::server {

// One Maintenance.Snapshot download: the archive of one checkpoint, kept alive while streaming.
struct SnapshotArchiveStream {
  SnapshotArchiveStream(std::shared_ptr<const Checkpoint> c, ArchiveHeader header)
      : checkpoint(std::move(c)), writer(std::move(header), checkpoint->files) {}
  std::shared_ptr<const Checkpoint> checkpoint;
  ArchiveWriter writer;
};

struct SnapshotStats {
  std::uint64_t sent = 0;         // transfers the peer acknowledged complete
  std::uint64_t send_failed = 0;  // transfers that failed (timeout, refused, read error)
  std::uint64_t received = 0;     // images fully assembled
  std::uint64_t installed = 0;    // images swapped into the state machine
  std::uint64_t compactions = 0;
  std::uint64_t checkpoints = 0;
  std::uint64_t archives = 0;             // Maintenance.Snapshot streams opened
  std::uint64_t archive_streams_cut = 0;  // ... ended for not reading (archive_write_timeout)
  LogIndex last_compaction;
};

class SnapshotManager final : public SnapshotHooks {
 public:
  using FrameSender = std::function<void(NodeId peer, std::string frame)>;
  using ArchiveCallback = std::function<void(Result<std::shared_ptr<SnapshotArchiveStream>>)>;

  // Transfers, assembly and compaction flushes run on `io` (one thread: the node's snapshot
  // loop, server/daemon/src/executors.h).
  SnapshotManager(SnapshotOptions options, NodeId self, std::uint64_t cluster_id, std::string root,
                  KvStore& store, DurableLog& log, RaftDriver& driver, asio::io_context& io,
                  FrameSender send_frame, PeerDrops* drops = nullptr);
  ~SnapshotManager() override;
  SnapshotManager(const SnapshotManager&) = delete;
  SnapshotManager& operator=(const SnapshotManager&) = delete;

  // Empties the snapshot directory and schedules housekeeping on the I/O loop.
  [[nodiscard]] Status Start();
  // After the I/O loop has stopped: abandons running transfers (the peers time out) and removes
  // assembled images not yet installed. Idempotent.
  void Stop();

  // A frame for which IsSnapshotTraffic() holds, from the transport (any thread).
  void HandleFrame(raftpb::Message message);

  // Maintenance.Snapshot: a checkpoint of at least the current applied state as an archive. The
  // checkpoint is taken on the I/O thread; `done` runs on the driver's strand (it must not
  // block), or here when the manager is stopped.
  void OpenArchive(ArchiveCallback done);
  // A Maintenance.Snapshot stream was ended for not reading (options().archive_write_timeout).
  void CountArchiveStreamCut();
  [[nodiscard]] const SnapshotOptions& options() const { return options_; }

  // Runs on the strand after an image replaced the state machine (watch and lease bookkeeping
  // that caches store state must resynchronise). Subscribed before the driver starts.
  void AddInstalledHook(std::function<void(const raft::SnapshotMeta&)> hook) {
    on_installed_.push_back(std::move(hook));
  }

  // SnapshotHooks (driver strand).
  void SendSnapshot(const raft::Message& message) override;
  Status InstallSnapshot(const raft::SnapshotMeta& meta) override;
  void AfterAdvance(const raft::Ready& ready, const raft::Node& node) override;

  [[nodiscard]] SnapshotStats stats() const;
  // The snapshots' part of /metrics: transfers, installs, log compactions, the log's first index.
  void RenderMetrics(MetricsText& m) const;

 private:
  struct Outgoing {
    std::unique_ptr<SnapshotSender> sender;
    std::shared_ptr<const Checkpoint> checkpoint;
    SteadyTime started;
  };
  // Images the core may still ask for, by (index, term) of their snapshot meta.
  using ImageKey = std::pair<LogIndex, Term>;
  static constexpr std::size_t kReadyImagesMax = 3;

  // I/O thread.
  void ScheduleHousekeeping();
  void PrepareTransfer(raft::Message envelope);
  void StartTransfer(raft::Message envelope, std::shared_ptr<const Checkpoint> checkpoint);
  void HandleChunk(const raftpb::Message& message);
  void HandleAck(const raftpb::Message& message);
  void MaybeFinish(NodeId peer);
  void KeepReadyImage(const AssembledSnapshot& image, const raftpb::Message& envelope);
  // Strand.
  void MaybeCompact(const raft::Node& node);
  void FinishCompaction(LogIndex target, std::uint64_t bytes_at_start, const raft::ConfState& conf,
                        const Result<LogIndex>& flushed);
  void FailTransferNow(NodeId peer, const std::string& reason);  // any thread
  void FinishArchive(const Result<std::shared_ptr<const Checkpoint>>& checkpoint,
                     const ArchiveCallback& done);

  const SnapshotOptions options_;
  const NodeId self_;
  const std::uint64_t cluster_id_;
  const std::string root_;
  KvStore& store_;
  DurableLog& log_;
  RaftDriver& driver_;
  FrameSender send_frame_;
  PeerDrops* const drops_;            // may be null
  std::uint64_t chunks_refused_ = 0;  // chunks not from the leader (I/O thread only)
  std::vector<std::function<void(const raft::SnapshotMeta&)>> on_installed_;

  asio::io_context& io_;
  asio::steady_timer housekeeping_;
  std::atomic<bool> running_{false};
  std::atomic<std::uint64_t> next_transfer_id_{1};

  // --- Strand only ---
  raft::ConfState conf_;  // membership as of the core's applied index
  std::uint64_t bytes_since_compaction_ = 0;
  LogIndex last_conf_change_;     // last applied kConfChange entry
  bool flush_in_flight_ = false;  // a compaction's flush runs on the I/O thread
  int archives_preparing_ = 0;    // archives whose checkpoint is being taken: no compaction

  // --- I/O thread only ---
  CheckpointCache checkpoints_;
  std::map<NodeId, Outgoing> outgoing_;
  SnapshotAssembler assembler_;

  mutable std::mutex mu_;
  std::set<NodeId> sending_;  // guarded by mu_: peers with a transfer running
  // Guarded by mu_: assembled images waiting for the core's Ready::snapshot, at most
  // kReadyImagesMax (a newer one may complete while the strand is about to install an older one).
  std::map<ImageKey, std::string> ready_images_;
  SnapshotStats stats_;  // guarded by mu_
};

}  // namespace epoch::server
