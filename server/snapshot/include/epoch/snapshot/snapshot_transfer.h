// Raft snapshot transfer between nodes: the two ends of one InstallSnapshot stream of a RocksDB
// checkpoint, as plain objects with injected time, so they can be tested without sockets or
// sleeps. The SnapshotManager (server/snapshot/include/epoch/snapshot/snapshot_manager.h) runs them
// on its I/O thread.
//
// The stream (server/SNAPSHOT.md §3): the leader sends every checkpoint file in chunks of at most
// `chunk_bytes` (an empty file as one empty chunk), then a manifest chunk (`last` set) naming every
// file and its size. Each chunk carries the transfer id, the file name, the offset, the data and
// its CRC-32C. The receiver acknowledges every chunk with the count of distinct bytes it holds
// (and `complete` once the manifest and every byte it lists are on disk); the sender keeps at
// most `window_bytes` unacknowledged, so neither side holds the image in memory.
//
// Transfers are ordered by (term, transfer id): a chunk of a newer transfer discards the
// receiver's older incomplete one (superseded); a chunk of an older transfer is refused (stale).
// Every chunk announces the transfer's total size (`total_bytes`, manifest included): the first
// chunk of a transfer is refused unless that size fits in the staging file system's free space
// (ChunkAck::no_space), and a transfer never stores more bytes than it announced.
// A CRC mismatch, a chunk overlapping another, a bad name or a chunk past a file's size aborts the
// transfer: the receiver discards it and answers every later chunk of it with a rejection; the
// sender then fails and the leader retries with a new transfer.
//
// Threading: each object is used by one thread at a time (the manager's I/O thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/raft/message.h"
#include "epoch/raft/types.h"
#include "epoch/snapshot/snapshot_archive.h"
#include "epoch/status.h"

namespace epoch::raftpb {
class Message;
}  // namespace epoch::raftpb

namespace epoch::server {

using SteadyTime = std::chrono::steady_clock::time_point;

// Name of the manifest chunk's pseudo-file (RocksDB never names a file with a leading dot).
inline constexpr std::string_view kSnapshotManifestName = ".epoch-manifest";

// One received chunk, decoded from the wire.
struct SnapshotChunkIn {
  NodeId from;
  Term term;
  std::uint64_t transfer_id = 0;
  raft::SnapshotMeta meta;
  std::string file;
  std::uint64_t offset = 0;
  std::string_view data;
  std::uint32_t crc32c = 0;
  bool last = false;  // the manifest chunk
  std::uint64_t total_bytes = 0;
};

enum class ChunkVerdict : std::uint8_t {
  kAccepted,   // new bytes stored
  kDuplicate,  // already had exactly this chunk (or the transfer is already complete)
  kComplete,   // this chunk completed the transfer: TakeCompleted() has it
  kStale,      // from a transfer older than the current one: refused
  kAborted,    // the transfer is (now) aborted: refused
};

[[nodiscard]] std::string_view ChunkVerdictName(ChunkVerdict verdict);

struct ChunkAck {
  ChunkVerdict verdict = ChunkVerdict::kAccepted;
  std::uint64_t received_bytes = 0;  // distinct bytes held for this transfer
  bool complete = false;             // the transfer is complete (this chunk or an earlier one)
  std::string error;                 // kAborted / kStale: why
  bool no_space = false;             // kAborted: the announced size does not fit on the disk
};

// A fully received snapshot image, on disk in `dir`.
struct AssembledSnapshot {
  NodeId from;
  Term term;
  std::uint64_t transfer_id = 0;
  raft::SnapshotMeta meta;
  std::string dir;
};

// Receiver: assembles at most one transfer at a time in a staging directory under `staging_root`.
class SnapshotAssembler {
 public:
  // Bytes free for the staging directory (std::filesystem::space by default; tests inject one).
  using FreeSpaceFn = std::function<Result<std::uint64_t>(const std::string& dir)>;
  // Free space kept beyond the announced size, so a snapshot never fills the disk the WAL and
  // the state machine write to.
  static constexpr std::uint64_t kFreeSpaceReserve = 64ULL << 20;

  explicit SnapshotAssembler(std::string staging_root, FreeSpaceFn free_space = {});
  // Removes the staging directory of an incomplete transfer.
  ~SnapshotAssembler();
  SnapshotAssembler(const SnapshotAssembler&) = delete;
  SnapshotAssembler& operator=(const SnapshotAssembler&) = delete;

  ChunkAck Add(const SnapshotChunkIn& chunk, SteadyTime now);
  // Discards an incomplete transfer that received nothing for `idle` (an interrupted transfer).
  // Returns whether one was discarded.
  bool ExpireIdle(SteadyTime now, std::chrono::milliseconds idle);
  // After kComplete: the image; its directory now belongs to the caller.
  [[nodiscard]] std::optional<AssembledSnapshot> TakeCompleted();

  // Whether a transfer is being assembled (not complete, not aborted).
  [[nodiscard]] bool receiving() const;
  [[nodiscard]] std::uint64_t transfers_discarded() const { return discarded_; }

 private:
  struct FileState;
  struct Transfer;

  ChunkAck Abort(std::string error);
  ChunkAck AbortOverAnnounced();
  void Discard();
  ChunkAck AddManifest(const SnapshotChunkIn& chunk);
  ChunkAck AddData(const SnapshotChunkIn& chunk);
  ChunkAck MaybeComplete(ChunkVerdict verdict_if_not);
  [[nodiscard]] Status CheckSpace(std::uint64_t total_bytes) const;

  const std::string staging_root_;
  const FreeSpaceFn free_space_;
  std::unique_ptr<Transfer> current_;
  std::uint64_t discarded_ = 0;
};

struct SnapshotSendOptions {
  std::size_t chunk_bytes = 1 << 20;
  std::uint64_t window_bytes = 8 << 20;
  // Fail when no acknowledgement made progress for this long.
  std::chrono::milliseconds stall_timeout{10'000};
};

// Sender: streams one checkpoint to one peer. `send` gets each encoded peer frame.
class SnapshotSender {
 public:
  enum class State : std::uint8_t { kSending, kSucceeded, kFailed };
  using SendFn = std::function<void(std::string frame)>;

  // `envelope` is the core's kInstallSnapshot message (from, to, term, snapshot meta, round).
  SnapshotSender(raft::Message envelope, std::uint64_t transfer_id, std::vector<ArchiveFile> files,
                 SnapshotSendOptions options, SendFn send, SteadyTime now);

  // Sends chunks while the window allows.
  void Pump(SteadyTime now);
  void OnAck(std::uint64_t received_bytes, bool complete, bool reject, std::string_view reason,
             SteadyTime now);
  // Fails the transfer if it stalled.
  void CheckTimeout(SteadyTime now);
  // Fails the transfer (shutdown, superseded).
  void Cancel(std::string reason);

  [[nodiscard]] State state() const { return state_; }
  [[nodiscard]] const std::string& error() const { return error_; }
  [[nodiscard]] NodeId peer() const { return envelope_.to; }
  [[nodiscard]] std::uint64_t transfer_id() const { return transfer_id_; }
  [[nodiscard]] std::uint64_t total_bytes() const { return total_bytes_; }
  [[nodiscard]] std::uint64_t sent_bytes() const { return sent_bytes_; }
  [[nodiscard]] std::uint64_t chunks_sent() const { return chunks_sent_; }

 private:
  void Fail(std::string reason);
  [[nodiscard]] std::string Manifest() const;

  const raft::Message envelope_;
  const std::uint64_t transfer_id_;
  const std::vector<ArchiveFile> files_;
  const SnapshotSendOptions options_;
  SendFn send_;
  const std::string manifest_;
  const std::uint64_t total_bytes_;

  State state_ = State::kSending;
  std::string error_;
  std::size_t file_ = 0;      // next file to send from (== files_.size(): the manifest)
  std::uint64_t offset_ = 0;  // next offset in files_[file_]
  bool manifest_sent_ = false;
  std::uint64_t sent_bytes_ = 0;  // data bytes sent (manifest included)
  std::uint64_t acked_bytes_ = 0;
  std::uint64_t chunks_sent_ = 0;
  SteadyTime last_progress_;
};

// --- wire (epoch.raftpb frames) -------------------------------------------------------------

// A chunk frame: the core's InstallSnapshot envelope with a SnapshotChunk.
[[nodiscard]] std::string EncodeChunkFrame(const raft::Message& envelope, std::uint64_t transfer_id,
                                           std::string_view file, std::uint64_t offset,
                                           std::string_view data, bool last,
                                           std::uint64_t total_bytes);
// An acknowledgement frame (INSTALL_SNAPSHOT_RESPONSE) from `from` to `to`.
[[nodiscard]] std::string EncodeAckFrame(NodeId from, NodeId to, std::uint64_t transfer_id,
                                         const ChunkAck& ack);

struct SnapshotAckIn {
  NodeId from;
  std::uint64_t transfer_id = 0;
  std::uint64_t received_bytes = 0;
  bool complete = false;
  bool reject = false;
  std::string reason;
};

// True for snapshot traffic (chunks and acknowledgements): the SnapshotManager takes it, the
// core never sees it (it gets the InstallSnapshot only once the image is on disk).
[[nodiscard]] bool IsSnapshotTraffic(const raftpb::Message& message);
// A chunk; `data` and `file` view into / copy from `message`, which must outlive the result.
[[nodiscard]] Result<SnapshotChunkIn> DecodeChunk(const raftpb::Message& message);
[[nodiscard]] Result<SnapshotAckIn> DecodeAck(const raftpb::Message& message);

}  // namespace epoch::server
