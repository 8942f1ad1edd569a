// Both ends of a Raft snapshot transfer (see snapshot_transfer.h and server/SNAPSHOT.md §3).
#include "epoch/snapshot/snapshot_transfer.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <tuple>

#include "epoch/crc32c.h"
#include "epoch/peer/peer_codec.h"
#include "epoch/snapshot/snapshot_io.h"
#include "epoch/snapshot_format/snapshot_format.h"
#include "raftpb/raft.pb.h"

namespace epoch::server {
namespace {

namespace sio = snapshot_io;

using TransferKey = std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>;

TransferKey KeyOf(Term term, std::uint64_t transfer_id, NodeId from) {
  return {term.value(), transfer_id, from.value()};
}

// "name size\n" per file, in sending order.
Result<std::map<std::string, std::uint64_t>> ParseManifest(std::string_view text) {
  std::map<std::string, std::uint64_t> files;
  std::istringstream in{std::string(text)};
  std::string name;
  std::uint64_t size = 0;
  while (in >> name >> size) {
    if (!snapshot_format::IsSafeFileName(name) || name == kSnapshotManifestName) {
      return Status::Corruption(fmt::format("manifest names a bad file '{}'", name));
    }
    if (!files.emplace(name, size).second) {
      return Status::Corruption(fmt::format("manifest names {} twice", name));
    }
  }
  if (!in.eof()) return Status::Corruption("malformed manifest");
  return files;
}

}  // namespace

std::string_view ChunkVerdictName(ChunkVerdict verdict) {
  switch (verdict) {
    case ChunkVerdict::kAccepted: return "accepted";
    case ChunkVerdict::kDuplicate: return "duplicate";
    case ChunkVerdict::kComplete: return "complete";
    case ChunkVerdict::kStale: return "stale";
    case ChunkVerdict::kAborted: return "aborted";
  }
  return "unknown";
}

// ---------------------------------------------------------------------------------------------
// Receiver

struct SnapshotAssembler::FileState {
  // Received byte ranges: offset -> length. Invariant: non-overlapping, within the manifest size.
  std::map<std::uint64_t, std::uint64_t> ranges;
  std::uint64_t bytes = 0;  // sum of the range lengths
  sio::File file;
};

struct SnapshotAssembler::Transfer {
  enum class Phase : std::uint8_t { kReceiving, kComplete, kTaken, kAborted };

  NodeId from;
  Term term;
  std::uint64_t id = 0;
  raft::SnapshotMeta meta;
  std::string dir;
  std::map<std::string, FileState> files;
  std::optional<std::map<std::string, std::uint64_t>> manifest;
  std::string manifest_text;
  std::uint64_t total_bytes = 0;  // announced by the first chunk, manifest included
  std::uint64_t received = 0;     // distinct bytes, manifest included
  SteadyTime last_activity;
  Phase phase = Phase::kReceiving;
  std::string abort_reason;
};

SnapshotAssembler::SnapshotAssembler(std::string staging_root, FreeSpaceFn free_space)
    : staging_root_(std::move(staging_root)), free_space_(std::move(free_space)) {}

Status SnapshotAssembler::CheckSpace(std::uint64_t total_bytes) const {
  Result<std::uint64_t> free = std::uint64_t{0};
  if (free_space_) {
    free = free_space_(staging_root_);
  } else {
    // The staging root may not exist yet: its nearest existing ancestor is on the same disk.
    std::filesystem::path dir = staging_root_;
    std::error_code ec;
    while (!std::filesystem::exists(dir, ec) && dir.has_parent_path() && dir != dir.parent_path()) {
      dir = dir.parent_path();
    }
    const std::filesystem::space_info info = std::filesystem::space(dir, ec);
    if (ec)
      return Status::IOError(fmt::format("free space of {}: {}", staging_root_, ec.message()));
    free = static_cast<std::uint64_t>(info.available);
  }
  if (!free.ok()) return free.status();
  if (total_bytes > *free || *free - total_bytes < kFreeSpaceReserve) {
    return Status::IOError(
        fmt::format("the snapshot announces {} bytes and {} are free (keeping {} in reserve)",
                    total_bytes, *free, kFreeSpaceReserve));
  }
  return Status::Ok();
}

SnapshotAssembler::~SnapshotAssembler() { Discard(); }

bool SnapshotAssembler::receiving() const {
  return current_ && current_->phase == Transfer::Phase::kReceiving;
}

void SnapshotAssembler::Discard() {
  if (!current_) return;
  if (current_->phase == Transfer::Phase::kReceiving) ++discarded_;
  if (current_->phase == Transfer::Phase::kReceiving ||
      current_->phase == Transfer::Phase::kComplete) {
    current_->files.clear();  // close before removing
    (void)sio::RemoveAll(current_->dir);
  }
}

ChunkAck SnapshotAssembler::Abort(std::string error) {
  Transfer& t = *current_;
  Discard();
  t.phase = Transfer::Phase::kAborted;
  t.abort_reason = std::move(error);
  return ChunkAck{ChunkVerdict::kAborted, t.received, false, t.abort_reason};
}

ChunkAck SnapshotAssembler::AbortOverAnnounced() {
  return Abort(
      fmt::format("the transfer sends more than the {} bytes it announced", current_->total_bytes));
}

ChunkAck SnapshotAssembler::Add(const SnapshotChunkIn& chunk, SteadyTime now) {
  const TransferKey key = KeyOf(chunk.term, chunk.transfer_id, chunk.from);
  if (current_ && key < KeyOf(current_->term, current_->id, current_->from)) {
    return ChunkAck{ChunkVerdict::kStale, 0, false,
                    "superseded by a newer snapshot transfer on the receiver"};
  }
  if (!current_ || key > KeyOf(current_->term, current_->id, current_->from)) {
    Discard();  // a newer transfer supersedes an incomplete (or untaken) older one
    current_ = std::make_unique<Transfer>();
    current_->from = chunk.from;
    current_->term = chunk.term;
    current_->id = chunk.transfer_id;
    current_->meta = chunk.meta;
    current_->total_bytes = chunk.total_bytes;
    current_->dir =
        fmt::format("{}/recv-{}-{}-{:x}", staging_root_, chunk.term, chunk.transfer_id, chunk.from);
    current_->last_activity = now;
    if (chunk.total_bytes == 0) return Abort("the transfer announces no size");
    if (Status space = CheckSpace(chunk.total_bytes); !space.ok()) {
      ChunkAck refused = Abort(space.message());
      refused.no_space = true;
      return refused;
    }
    std::error_code ec;
    std::filesystem::remove_all(current_->dir, ec);
    std::filesystem::create_directories(current_->dir, ec);
    if (ec) return Abort(fmt::format("cannot create {}: {}", current_->dir, ec.message()));
  }
  Transfer& t = *current_;
  switch (t.phase) {
    case Transfer::Phase::kAborted:
      return ChunkAck{ChunkVerdict::kAborted, t.received, false, t.abort_reason};
    case Transfer::Phase::kComplete:
    case Transfer::Phase::kTaken: return ChunkAck{ChunkVerdict::kDuplicate, t.received, true, {}};
    case Transfer::Phase::kReceiving: break;
  }
  t.last_activity = now;
  if (crc32c::Value(chunk.data) != chunk.crc32c) {
    return Abort(
        fmt::format("chunk of {} at offset {} failed its CRC-32C check", chunk.file, chunk.offset));
  }
  if (chunk.meta != t.meta) return Abort("chunks of one transfer disagree on the snapshot meta");
  if (chunk.total_bytes != t.total_bytes)
    return Abort("chunks of one transfer disagree on its size");

  const bool is_manifest = chunk.file == kSnapshotManifestName;
  if (is_manifest != chunk.last) {
    return Abort(fmt::format("chunk {}: only the manifest may be the last chunk", chunk.file));
  }
  return is_manifest ? AddManifest(chunk) : AddData(chunk);
}

ChunkAck SnapshotAssembler::AddManifest(const SnapshotChunkIn& chunk) {
  Transfer& t = *current_;
  if (t.manifest) {
    if (chunk.offset == 0 && chunk.data == t.manifest_text) {
      return ChunkAck{ChunkVerdict::kDuplicate, t.received, false, {}};
    }
    return Abort("two different manifests in one transfer");
  }
  if (chunk.offset != 0) return Abort("manifest chunk at a non-zero offset");
  if (t.received + chunk.data.size() > t.total_bytes) return AbortOverAnnounced();
  Result<std::map<std::string, std::uint64_t>> manifest = ParseManifest(chunk.data);
  if (!manifest.ok()) return Abort(manifest.status().message());
  for (const auto& [name, state] : t.files) {
    auto it = manifest->find(name);
    if (it == manifest->end()) return Abort(fmt::format("{} is not in the manifest", name));
    if (!state.ranges.empty()) {
      const auto& [offset, length] = *state.ranges.rbegin();
      if (offset + length > it->second) {
        return Abort(fmt::format("{} received past its size {}", name, it->second));
      }
    }
  }
  t.manifest = std::move(*manifest);
  t.manifest_text = std::string(chunk.data);
  t.received += chunk.data.size();
  return MaybeComplete(ChunkVerdict::kAccepted);
}

ChunkAck SnapshotAssembler::AddData(const SnapshotChunkIn& chunk) {
  Transfer& t = *current_;
  if (!snapshot_format::IsSafeFileName(chunk.file)) {
    return Abort(fmt::format("bad file name '{}'", chunk.file));
  }
  const std::uint64_t length = chunk.data.size();
  if (t.manifest) {
    auto it = t.manifest->find(chunk.file);
    if (it == t.manifest->end()) return Abort(fmt::format("{} is not in the manifest", chunk.file));
    if (chunk.offset + length > it->second) {
      return Abort(fmt::format("chunk of {} at offset {} runs past its size {}", chunk.file,
                               chunk.offset, it->second));
    }
  }
  auto [pos, created] = t.files.try_emplace(chunk.file);
  FileState& f = pos->second;
  const std::string path = t.dir + "/" + chunk.file;
  if (created) {
    Result<sio::File> file = sio::OpenForWrite(path);
    if (!file.ok()) return Abort(file.status().message());
    f.file = std::move(*file);
  }
  if (length == 0) {
    // An empty file is sent as one empty chunk at offset 0: it only creates the file.
    if (chunk.offset != 0) return Abort("empty chunk at a non-zero offset");
    return MaybeComplete(created ? ChunkVerdict::kAccepted : ChunkVerdict::kDuplicate);
  }
  auto next = f.ranges.lower_bound(chunk.offset);
  if (next != f.ranges.end() && next->first == chunk.offset && next->second == length) {
    return ChunkAck{ChunkVerdict::kDuplicate, t.received, false, {}};
  }
  const bool overlaps_next = next != f.ranges.end() && next->first < chunk.offset + length;
  const bool overlaps_prev =
      next != f.ranges.begin() && std::prev(next)->first + std::prev(next)->second > chunk.offset;
  if (overlaps_next || overlaps_prev) {
    return Abort(
        fmt::format("chunk of {} at offset {} overlaps another chunk", chunk.file, chunk.offset));
  }
  if (t.received + length > t.total_bytes) return AbortOverAnnounced();
  Status written = sio::WriteAt(f.file, path, chunk.offset, chunk.data);
  if (!written.ok()) return Abort(written.message());
  f.ranges.emplace(chunk.offset, length);
  f.bytes += length;
  t.received += length;
  return MaybeComplete(ChunkVerdict::kAccepted);
}

ChunkAck SnapshotAssembler::MaybeComplete(ChunkVerdict verdict_if_not) {
  Transfer& t = *current_;
  if (!t.manifest || t.files.size() != t.manifest->size()) {
    return ChunkAck{verdict_if_not, t.received, false, {}};
  }
  for (const auto& [name, size] : *t.manifest) {
    auto it = t.files.find(name);
    // Non-overlapping ranges inside [0, size) whose lengths add up to size cover the file.
    if (it == t.files.end() || it->second.bytes != size) {
      return ChunkAck{verdict_if_not, t.received, false, {}};
    }
  }
  for (auto& [name, state] : t.files) {
    Status synced = sio::SyncFile(state.file, t.dir + "/" + name);
    if (!synced.ok()) return Abort(synced.message());
    state.file = sio::File();
  }
  Status dir_synced = sio::SyncDir(t.dir);
  if (!dir_synced.ok()) return Abort(dir_synced.message());
  t.phase = Transfer::Phase::kComplete;
  return ChunkAck{ChunkVerdict::kComplete, t.received, true, {}};
}

bool SnapshotAssembler::ExpireIdle(SteadyTime now, std::chrono::milliseconds idle) {
  if (!receiving() || now - current_->last_activity < idle) return false;
  Abort(fmt::format("interrupted: no chunk for {} ms", idle.count()));
  return true;
}

std::optional<AssembledSnapshot> SnapshotAssembler::TakeCompleted() {
  if (!current_ || current_->phase != Transfer::Phase::kComplete) return std::nullopt;
  current_->phase = Transfer::Phase::kTaken;
  return AssembledSnapshot{current_->from, current_->term, current_->id, current_->meta,
                           current_->dir};
}

// ---------------------------------------------------------------------------------------------
// Sender

SnapshotSender::SnapshotSender(raft::Message envelope, std::uint64_t transfer_id,
                               std::vector<ArchiveFile> files, SnapshotSendOptions options,
                               SendFn send, SteadyTime now)
    : envelope_(std::move(envelope)),
      transfer_id_(transfer_id),
      files_(std::move(files)),
      options_(options),
      send_(std::move(send)),
      manifest_(Manifest()),
      total_bytes_([this] {
        std::uint64_t total = manifest_.size();
        for (const ArchiveFile& f : files_) total += f.size;
        return total;
      }()),
      last_progress_(now) {}

std::string SnapshotSender::Manifest() const {
  std::string out;
  for (const ArchiveFile& f : files_) out += fmt::format("{} {}\n", f.name, f.size);
  return out;
}

void SnapshotSender::Pump(SteadyTime /*now*/) {
  while (state_ == State::kSending && !manifest_sent_ &&
         sent_bytes_ - acked_bytes_ < options_.window_bytes) {
    if (file_ == files_.size()) {
      send_(EncodeChunkFrame(envelope_, transfer_id_, kSnapshotManifestName, 0, manifest_, true,
                             total_bytes_));
      manifest_sent_ = true;
      sent_bytes_ += manifest_.size();
      ++chunks_sent_;
      return;
    }
    const ArchiveFile& f = files_[file_];
    const std::uint64_t n = std::min<std::uint64_t>(options_.chunk_bytes, f.size - offset_);
    std::string data(n, '\0');
    if (n > 0) {
      // Checkpoint files are immutable; reopening per chunk keeps no descriptor across pumps.
      Result<sio::File> file = sio::OpenForRead(f.path);
      Status read = file.ok() ? sio::ReadAt(*file, f.path, offset_, data.data(), n) : file.status();
      if (!read.ok()) return Fail(read.ToString());
    }
    send_(EncodeChunkFrame(envelope_, transfer_id_, f.name, offset_, data, false, total_bytes_));
    ++chunks_sent_;
    sent_bytes_ += n;
    offset_ += n;
    if (offset_ == f.size) {
      ++file_;
      offset_ = 0;
    }
  }
}

void SnapshotSender::OnAck(std::uint64_t received_bytes, bool complete, bool reject,
                           std::string_view reason, SteadyTime now) {
  if (state_ != State::kSending) return;
  if (reject) return Fail(fmt::format("peer refused the transfer: {}", reason));
  if (received_bytes > acked_bytes_) {
    acked_bytes_ = std::min(received_bytes, sent_bytes_);
    last_progress_ = now;
  }
  if (complete) {
    state_ = State::kSucceeded;
    return;
  }
  Pump(now);
}

void SnapshotSender::CheckTimeout(SteadyTime now) {
  if (state_ == State::kSending && now - last_progress_ > options_.stall_timeout) {
    Fail(fmt::format("no acknowledged progress for {} ms ({} of {} bytes acknowledged)",
                     options_.stall_timeout.count(), acked_bytes_, total_bytes_));
  }
}

void SnapshotSender::Cancel(std::string reason) {
  if (state_ == State::kSending) Fail(std::move(reason));
}

void SnapshotSender::Fail(std::string reason) {
  state_ = State::kFailed;
  error_ = std::move(reason);
}

// ---------------------------------------------------------------------------------------------
// Wire

std::string EncodeChunkFrame(const raft::Message& envelope, std::uint64_t transfer_id,
                             std::string_view file, std::uint64_t offset, std::string_view data,
                             bool last, std::uint64_t total_bytes) {
  raftpb::Frame frame;
  raftpb::Message* m = frame.mutable_message();
  EncodeMessage(envelope, m);
  raftpb::SnapshotChunk* chunk = m->mutable_snapshot();
  chunk->set_transfer_id(transfer_id);
  chunk->set_file(std::string(file));
  chunk->set_offset(offset);
  chunk->set_data(std::string(data));
  chunk->set_crc32c(crc32c::Value(data));
  chunk->set_last(last);
  chunk->set_total_bytes(total_bytes);
  return frame.SerializeAsString();
}

std::string EncodeAckFrame(NodeId from, NodeId to, std::uint64_t transfer_id, const ChunkAck& ack) {
  raftpb::Frame frame;
  raftpb::Message* m = frame.mutable_message();
  m->set_type(raftpb::INSTALL_SNAPSHOT_RESPONSE);
  m->set_from(from.value());
  m->set_to(to.value());
  const bool reject = ack.verdict == ChunkVerdict::kStale || ack.verdict == ChunkVerdict::kAborted;
  m->set_reject(reject);
  if (reject) m->set_context(ack.error);
  raftpb::SnapshotChunk* chunk = m->mutable_snapshot();
  chunk->set_transfer_id(transfer_id);
  chunk->set_offset(ack.received_bytes);
  chunk->set_last(ack.complete);
  return frame.SerializeAsString();
}

bool IsSnapshotTraffic(const raftpb::Message& message) {
  return message.type() == raftpb::INSTALL_SNAPSHOT ||
         message.type() == raftpb::INSTALL_SNAPSHOT_RESPONSE;
}

Result<SnapshotChunkIn> DecodeChunk(const raftpb::Message& m) {
  if (m.type() != raftpb::INSTALL_SNAPSHOT || !m.has_snapshot() ||
      m.snapshot().transfer_id() == 0 || !m.snapshot().has_meta() ||
      m.snapshot().meta().index() == 0) {
    return Status::InvalidArgument("not a snapshot chunk (no transfer id or meta)");
  }
  Result<raft::Message> envelope = DecodeMessage(m);
  if (!envelope.ok()) return envelope.status();
  const raftpb::SnapshotChunk& c = m.snapshot();
  SnapshotChunkIn in;
  in.from = envelope->from;
  in.term = envelope->term;
  in.transfer_id = c.transfer_id();
  in.meta = *envelope->snapshot;
  in.file = c.file();
  in.offset = c.offset();
  in.data = c.data();
  in.crc32c = c.crc32c();
  in.last = c.last();
  in.total_bytes = c.total_bytes();
  return in;
}

Result<SnapshotAckIn> DecodeAck(const raftpb::Message& m) {
  if (m.type() != raftpb::INSTALL_SNAPSHOT_RESPONSE || !m.has_snapshot()) {
    return Status::InvalidArgument("not a snapshot acknowledgement");
  }
  SnapshotAckIn ack;
  ack.from = NodeId(m.from());
  ack.transfer_id = m.snapshot().transfer_id();
  ack.received_bytes = m.snapshot().offset();
  ack.complete = m.snapshot().last();
  ack.reject = m.reject();
  ack.reason = m.context();
  return ack;
}

}  // namespace epoch::server
