// Raft snapshot transfer (server/SNAPSHOT.md §3): the sender and the receiver's assembler wired
// back to back through the real wire encoding, with injected time. In order, out of order,
// duplicated, corrupted, superseded, stale and interrupted transfers; the sender's window and
// stall timeout.
#include "epoch/snapshot/snapshot_transfer.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <deque>
#include <filesystem>
#include <limits>
#include <random>
#include <set>

#include "raftpb/raft.pb.h"
#include "snapshot_test_util.h"

namespace epoch::server {
namespace {

using namespace snapshot_testing;
using namespace std::chrono_literals;

constexpr NodeId kLeader{1};
constexpr NodeId kFollower{2};

raft::Message Envelope(Term term = Term(3), LogIndex index = LogIndex(500)) {
  raft::Message m;
  m.type = raft::MessageType::kInstallSnapshot;
  m.from = kLeader;
  m.to = kFollower;
  m.term = term;
  m.index = index;
  m.log_term = Term(2);
  m.snapshot = raft::SnapshotMeta{index, Term(2), raft::ConfState{{kLeader, kFollower}, {}}};
  return m;
}

raftpb::Message Parse(const std::string& frame) {
  raftpb::Frame f;
  REQUIRE(f.ParseFromString(frame));
  REQUIRE(f.has_message());
  return f.message();
}

std::vector<ArchiveFile> ListOrDie(const std::string& dir) {
  auto listed = ListCheckpointFiles(dir);
  REQUIRE(listed.ok());
  return *listed;
}

// Everything a transfer needs: source files, a sender whose frames are captured, a receiver.
struct Harness {
  TempDir tmp;
  std::map<std::string, std::string> files = MakeFiles(tmp.Sub("ckpt"), 7);
  std::vector<ArchiveFile> listed = ListOrDie(tmp.Sub("ckpt"));
  SteadyTime now = SteadyTime() + 1h;
  std::deque<std::string> wire;  // frames sent, not yet delivered
  SnapshotAssembler assembler{tmp.Sub("staging")};

  std::unique_ptr<SnapshotSender> MakeSender(std::uint64_t id, SnapshotSendOptions options,
                                             raft::Message envelope = Envelope()) {
    return std::make_unique<SnapshotSender>(
        std::move(envelope), id, listed, options,
        [this](std::string frame) { wire.push_back(std::move(frame)); }, now);
  }

  ChunkAck Deliver(const std::string& frame) {
    raftpb::Message m = Parse(frame);
    REQUIRE(IsSnapshotTraffic(m));
    auto chunk = DecodeChunk(m);
    REQUIRE(chunk.ok());
    return assembler.Add(*chunk, now);
  }

  // Delivers every frame in flight and feeds each acknowledgement (through its wire encoding)
  // back to the sender. Bounded by the number of chunks a transfer can have.
  void RunToEnd(SnapshotSender& sender) {
    sender.Pump(now);
    for (int step = 0; step < 10'000 && !wire.empty(); ++step) {
      std::string frame = std::move(wire.front());
      wire.pop_front();
      ChunkAck ack = Deliver(frame);
      auto decoded =
          DecodeAck(Parse(EncodeAckFrame(kFollower, kLeader, sender.transfer_id(), ack)));
      REQUIRE(decoded.ok());
      sender.OnAck(decoded->received_bytes, decoded->complete, decoded->reject, decoded->reason,
                   now);
    }
  }

  std::map<std::string, std::string> Received(const AssembledSnapshot& image) const {
    return DirContents(image.dir);
  }
};

SnapshotSendOptions SmallChunks() {
  SnapshotSendOptions o;
  o.chunk_bytes = 256 * 1024;
  o.window_bytes = 1024 * 1024;
  o.stall_timeout = 5s;
  return o;
}

std::size_t StagingDirs(const Harness& h) {
  if (!std::filesystem::exists(h.tmp.Sub("staging"))) return 0;
  return static_cast<std::size_t>(
      std::distance(std::filesystem::directory_iterator(h.tmp.Sub("staging")),
                    std::filesystem::directory_iterator()));
}

}  // namespace

TEST_CASE("snapshot transfer in order: every file arrives intact and the sender succeeds",
          "[snapshot]") {
  Harness h;
  auto sender = h.MakeSender(1, SmallChunks());
  h.RunToEnd(*sender);
  CHECK(sender->state() == SnapshotSender::State::kSucceeded);
  CHECK(sender->sent_bytes() == sender->total_bytes());
  auto image = h.assembler.TakeCompleted();
  REQUIRE(image);
  CHECK(image->meta == *Envelope().snapshot);
  CHECK(image->from == kLeader);
  CHECK(image->term == Term(3));
  CHECK(h.Received(*image) == h.files);
  // 3 MiB in 256 KiB chunks, four small files, the manifest.
  CHECK(sender->chunks_sent() == 13 + 4 + 1);
}

TEST_CASE("snapshot transfer: the sender keeps at most one window unacknowledged", "[snapshot]") {
  Harness h;
  auto sender = h.MakeSender(1, SmallChunks());
  sender->Pump(h.now);
  std::uint64_t bytes = 0;
  for (const std::string& frame : h.wire) bytes += Parse(frame).snapshot().data().size();
  CHECK(bytes >= SmallChunks().window_bytes);
  CHECK(bytes < SmallChunks().window_bytes + SmallChunks().chunk_bytes);
  const std::size_t before = h.wire.size();
  sender->Pump(h.now);  // nothing acknowledged: nothing more to send
  CHECK(h.wire.size() == before);
}

TEST_CASE("snapshot transfer out of order and duplicated: assembled once, complete at the end",
          "[snapshot]") {
  Harness h;
  SnapshotSendOptions o = SmallChunks();
  o.window_bytes = 64 << 20;  // everything at once
  auto sender = h.MakeSender(9, o);
  sender->Pump(h.now);
  std::vector<std::string> frames(h.wire.begin(), h.wire.end());
  h.wire.clear();
  REQUIRE(frames.size() > 10);
  const std::size_t unique = frames.size();
  std::vector<std::string> doubled = frames;
  doubled.insert(doubled.end(), frames.begin(), frames.begin() + 5);
  std::mt19937_64 rng(2024);
  std::shuffle(doubled.begin(), doubled.end(), rng);

  std::size_t completes = 0, duplicates = 0;
  std::set<std::string> seen;
  for (const std::string& frame : doubled) {
    ChunkAck ack = h.Deliver(frame);
    const bool first_time = seen.insert(frame).second;
    if (ack.verdict == ChunkVerdict::kComplete) ++completes;
    if (ack.verdict == ChunkVerdict::kDuplicate) ++duplicates;
    CHECK(ack.verdict != ChunkVerdict::kAborted);
    if (!first_time) CHECK(ack.verdict == ChunkVerdict::kDuplicate);
    // Complete exactly when the last distinct chunk arrived.
    CHECK(ack.complete == (seen.size() == unique));
  }
  CHECK(completes == 1);
  CHECK(duplicates == doubled.size() - unique);
  auto image = h.assembler.TakeCompleted();
  REQUIRE(image);
  CHECK(h.Received(*image) == h.files);
}

TEST_CASE("snapshot transfer: a CRC mismatch aborts the transfer and a new one succeeds",
          "[snapshot]") {
  Harness h;
  auto sender = h.MakeSender(1, SmallChunks());
  sender->Pump(h.now);
  REQUIRE(h.wire.size() >= 3);
  CHECK(h.Deliver(h.wire[0]).verdict == ChunkVerdict::kAccepted);
  // Flip one byte of the second chunk's data, keep its CRC.
  raftpb::Frame frame;
  REQUIRE(frame.ParseFromString(h.wire[1]));
  std::string* data = frame.mutable_message()->mutable_snapshot()->mutable_data();
  REQUIRE(!data->empty());
  (*data)[data->size() / 2] = static_cast<char>((*data)[data->size() / 2] ^ 0x40);
  ChunkAck bad = h.Deliver(frame.SerializeAsString());
  CHECK(bad.verdict == ChunkVerdict::kAborted);
  CHECK_THAT(bad.error, Catch::Contains("CRC-32C"));
  CHECK(StagingDirs(h) == 0);  // the partial image is gone
  // Later chunks of the aborted transfer are refused; the sender fails on the rejection.
  ChunkAck later = h.Deliver(h.wire[2]);
  CHECK(later.verdict == ChunkVerdict::kAborted);
  sender->OnAck(later.received_bytes, false, true, later.error, h.now);
  CHECK(sender->state() == SnapshotSender::State::kFailed);
  CHECK_THAT(sender->error(), Catch::Contains("refused"));
  CHECK(h.assembler.transfers_discarded() == 1);

  h.wire.clear();
  auto retry = h.MakeSender(2, SmallChunks());
  h.RunToEnd(*retry);
  CHECK(retry->state() == SnapshotSender::State::kSucceeded);
  auto image = h.assembler.TakeCompleted();
  REQUIRE(image);
  CHECK(image->transfer_id == 2);
  CHECK(h.Received(*image) == h.files);
}

TEST_CASE(
    "snapshot transfer: a newer transfer supersedes an incomplete one, whose chunks turn "
    "stale",
    "[snapshot]") {
  Harness h;
  auto old_sender = h.MakeSender(5, SmallChunks());
  old_sender->Pump(h.now);
  std::vector<std::string> old_frames(h.wire.begin(), h.wire.end());
  h.wire.clear();
  for (std::size_t i = 0; i < 3; ++i)
    CHECK(h.Deliver(old_frames[i]).verdict == ChunkVerdict::kAccepted);
  CHECK(h.assembler.receiving());
  CHECK(StagingDirs(h) == 1);

  SECTION("same term, higher transfer id") {
    auto next = h.MakeSender(6, SmallChunks());
    h.RunToEnd(*next);
    CHECK(next->state() == SnapshotSender::State::kSucceeded);
  }
  SECTION("higher term wins even with a lower transfer id (a new leader)") {
    auto next = h.MakeSender(1, SmallChunks(), Envelope(Term(4), LogIndex(600)));
    h.RunToEnd(*next);
    CHECK(next->state() == SnapshotSender::State::kSucceeded);
  }
  CHECK(h.assembler.transfers_discarded() == 1);
  auto image = h.assembler.TakeCompleted();
  REQUIRE(image);
  CHECK(h.Received(*image) == h.files);
  CHECK(StagingDirs(h) == 1);  // only the completed image (now owned by the caller)
  // A late chunk of the superseded transfer is refused as stale.
  ChunkAck late = h.Deliver(old_frames[3]);
  CHECK(late.verdict == ChunkVerdict::kStale);
  old_sender->OnAck(late.received_bytes, late.complete, true, late.error, h.now);
  CHECK(old_sender->state() == SnapshotSender::State::kFailed);
}

TEST_CASE("snapshot transfer: an interrupted transfer is discarded after the idle timeout",
          "[snapshot]") {
  Harness h;
  auto sender = h.MakeSender(1, SmallChunks());
  sender->Pump(h.now);
  CHECK(h.Deliver(h.wire[0]).verdict == ChunkVerdict::kAccepted);
  CHECK(!h.assembler.ExpireIdle(h.now + 29s, 30s));
  CHECK(StagingDirs(h) == 1);
  h.now += 30s;
  CHECK(h.assembler.ExpireIdle(h.now, 30s));
  CHECK(StagingDirs(h) == 0);
  CHECK(!h.assembler.receiving());
  // The sender, meanwhile, saw no progress and gives up on its own.
  sender->CheckTimeout(h.now);
  CHECK(sender->state() == SnapshotSender::State::kFailed);
  CHECK_THAT(sender->error(), Catch::Contains("no acknowledged progress"));
  // Its late chunks are refused rather than restarting a partial image.
  CHECK(h.Deliver(h.wire[1]).verdict == ChunkVerdict::kAborted);
}

TEST_CASE("snapshot transfer: overlapping chunks and chunks past the manifest abort",
          "[snapshot]") {
  Harness h;
  raft::Message env = Envelope();
  auto chunk = [&](const std::string& file, std::uint64_t offset, const std::string& data,
                   bool last = false) {
    return h.Deliver(EncodeChunkFrame(env, 77, file, offset, data, last, 1000));
  };
  SECTION("overlap") {
    CHECK(chunk("a.sst", 0, std::string(100, 'a')).verdict == ChunkVerdict::kAccepted);
    CHECK(chunk("a.sst", 0, std::string(100, 'a')).verdict == ChunkVerdict::kDuplicate);
    ChunkAck ack = chunk("a.sst", 50, std::string(100, 'b'));
    CHECK(ack.verdict == ChunkVerdict::kAborted);
    CHECK_THAT(ack.error, Catch::Contains("overlaps"));
  }
  SECTION("past the size the manifest gives") {
    CHECK(chunk(std::string(kSnapshotManifestName), 0, "a.sst 100\n", true).verdict ==
          ChunkVerdict::kAccepted);
    ChunkAck ack = chunk("a.sst", 64, std::string(64, 'a'));
    CHECK(ack.verdict == ChunkVerdict::kAborted);
    CHECK_THAT(ack.error, Catch::Contains("past its size"));
  }
  SECTION("a file the manifest does not list") {
    CHECK(chunk(std::string(kSnapshotManifestName), 0, "a.sst 1\n", true).verdict ==
          ChunkVerdict::kAccepted);
    CHECK(chunk("b.sst", 0, "x").verdict == ChunkVerdict::kAborted);
  }
  SECTION("a name that escapes the staging directory") {
    CHECK(chunk("../evil", 0, "x").verdict == ChunkVerdict::kAborted);
  }
  SECTION("a manifest chunk not flagged last") {
    CHECK(chunk(std::string(kSnapshotManifestName), 0, "a.sst 1\n", false).verdict ==
          ChunkVerdict::kAborted);
  }
  SECTION("exactly the manifest's bytes complete the image") {
    CHECK(chunk("a.sst", 0, "xy").verdict == ChunkVerdict::kAccepted);
    CHECK(chunk("e", 0, "").verdict == ChunkVerdict::kAccepted);
    CHECK(chunk(std::string(kSnapshotManifestName), 0, "a.sst 3\ne 0\n", true).verdict ==
          ChunkVerdict::kAccepted);
    CHECK(chunk("a.sst", 2, "z").verdict == ChunkVerdict::kComplete);
    auto image = h.assembler.TakeCompleted();
    REQUIRE(image);
    CHECK(DirContents(image->dir) ==
          std::map<std::string, std::string>{{"a.sst", "xyz"}, {"e", ""}});
  }
}

TEST_CASE("snapshot transfer: the sender fails once, on a stall, and only then", "[snapshot]") {
  Harness h;
  auto sender = h.MakeSender(1, SmallChunks());
  sender->Pump(h.now);
  sender->CheckTimeout(h.now + 5s);
  CHECK(sender->state() == SnapshotSender::State::kSending);
  // Progress resets the stall clock.
  h.now += 4s;
  sender->OnAck(1000, false, false, "", h.now);
  sender->CheckTimeout(h.now + 5s);
  CHECK(sender->state() == SnapshotSender::State::kSending);
  sender->CheckTimeout(h.now + 5s + 1ms);
  CHECK(sender->state() == SnapshotSender::State::kFailed);
  // A late completion does not turn a failed transfer into a success.
  sender->OnAck(sender->total_bytes(), true, false, "", h.now);
  CHECK(sender->state() == SnapshotSender::State::kFailed);
}

TEST_CASE("snapshot wire: Raft messages are not snapshot traffic, chunks keep the envelope",
          "[snapshot]") {
  raftpb::Message append;
  append.set_type(raftpb::APPEND_ENTRIES);
  CHECK(!IsSnapshotTraffic(append));
  raftpb::Message m = Parse(EncodeChunkFrame(Envelope(), 3, "f", 10, "data", false, 99));
  CHECK(IsSnapshotTraffic(m));
  auto chunk = DecodeChunk(m);
  REQUIRE(chunk.ok());
  CHECK(chunk->from == kLeader);
  CHECK(chunk->term == Term(3));
  CHECK(chunk->transfer_id == 3);
  CHECK(chunk->meta == *Envelope().snapshot);
  CHECK(chunk->file == "f");
  CHECK(chunk->offset == 10);
  CHECK(chunk->data == "data");
  CHECK(chunk->total_bytes == 99);
  // A bare InstallSnapshot without a transfer id (the core's message sent as is) is refused.
  raftpb::Message bare = m;
  bare.mutable_snapshot()->set_transfer_id(0);
  CHECK(!DecodeChunk(bare).ok());
}

TEST_CASE("snapshot transfer: the announced size must fit on the disk before a byte is written",
          "[snapshot][hostile]") {
  TempDir tmp;
  std::uint64_t free_bytes = 100ULL << 20;
  SnapshotAssembler assembler(
      tmp.Sub("staging"),
      [&free_bytes](const std::string&) -> Result<std::uint64_t> { return free_bytes; });
  const SteadyTime now = SteadyTime() + 1h;
  auto deliver = [&](std::uint64_t transfer, std::uint64_t total, std::string_view data) {
    raftpb::Message m =
        Parse(EncodeChunkFrame(Envelope(), transfer, "a.sst", 0, data, false, total));
    auto chunk = DecodeChunk(m);
    REQUIRE(chunk.ok());
    return assembler.Add(*chunk, now);
  };
  SECTION("more than the free space minus the reserve: refused, nothing staged") {
    ChunkAck ack = deliver(1, free_bytes - SnapshotAssembler::kFreeSpaceReserve + 1, "x");
    CHECK(ack.verdict == ChunkVerdict::kAborted);
    CHECK(ack.no_space);
    CHECK_FALSE(std::filesystem::exists(tmp.Sub("staging")));
    // 2^64-1 announced: refused too, no overflow.
    ack = deliver(2, std::numeric_limits<std::uint64_t>::max(), "x");
    CHECK(ack.no_space);
  }
  SECTION("no size announced: refused") {
    ChunkAck ack = deliver(1, 0, "x");
    CHECK(ack.verdict == ChunkVerdict::kAborted);
    CHECK_FALSE(ack.no_space);
  }
  SECTION("within the free space: accepted, but never more than announced") {
    CHECK(deliver(1, 10, "0123456789").verdict == ChunkVerdict::kAccepted);
    raftpb::Message more = Parse(EncodeChunkFrame(Envelope(), 1, "b.sst", 0, "x", false, 10));
    auto chunk = DecodeChunk(more);
    REQUIRE(chunk.ok());
    ChunkAck ack = assembler.Add(*chunk, now);
    CHECK(ack.verdict == ChunkVerdict::kAborted);
    CHECK_THAT(ack.error, Catch::Contains("more than the 10 bytes it announced"));
  }
  SECTION("a chunk announcing another size than its transfer's aborts it") {
    CHECK(deliver(1, 10, "01234").verdict == ChunkVerdict::kAccepted);
    raftpb::Message other = Parse(EncodeChunkFrame(Envelope(), 1, "a.sst", 5, "5", false, 11));
    auto chunk = DecodeChunk(other);
    REQUIRE(chunk.ok());
    CHECK(assembler.Add(*chunk, now).verdict == ChunkVerdict::kAborted);
  }
}

}  // namespace epoch::server
