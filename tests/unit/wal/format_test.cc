// The record/frame/segment encoding: round trips, and the randomized reader test: arbitrary and
// mutated bytes give a clean error (or the original, unchanged data), never a crash. Also run
// under AddressSanitizer (build/h-wal-asan) to catch out-of-bounds reads.
#include "epoch/wal/format.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>

#include "epoch/wal/segment_scan.h"
#include "wal_test_util.h"

namespace epoch::wal {
namespace {

using format::DecodedRecord;
using testing::MakeEntry;

std::string SamplePayload(std::uint32_t* count) {
  std::string p;
  format::AppendCheckpointRecord(
      &p, format::Checkpoint{raft::HardState{Term(3), NodeId(2), LogIndex(5)},
                             raft::SnapshotMeta{LogIndex(4), Term(2), {{NodeId(1)}, {NodeId(9)}}},
                             LogIndex(8)});
  format::AppendTruncateRecord(&p, LogIndex(6));
  format::AppendEntryRecord(&p, MakeEntry(6, 3, 100));
  format::AppendEntryRecord(&p,
                            raft::Entry{Term(3), LogIndex(7), raft::EntryType::kConfChange, ""});
  format::AppendHardStateRecord(&p, raft::HardState{Term(3), NodeId(1), LogIndex(7)});
  format::AppendSnapshotRecord(
      &p, format::SnapshotRecord{raft::SnapshotMeta{LogIndex(7), Term(3), {}}, true});
  *count = 6;
  return p;
}

// A segment image: header + one frame holding SamplePayload + zeros.
std::string SampleSegment(std::uint64_t seq, std::size_t size) {
  std::uint32_t count = 0;
  const std::string payload = SamplePayload(&count);
  std::string image = format::EncodeSegmentHeader(seq);
  image += format::EncodeFrameHeader(seq, format::kSegmentHeaderBytes, count, payload);
  image += payload;
  image.resize(size, '\0');
  return image;
}

TEST_CASE("records round-trip through encode and decode", "[wal][format]") {
  std::uint32_t count = 0;
  const std::string payload = SamplePayload(&count);
  auto records = format::DecodePayload(payload, count);
  REQUIRE(records.ok());
  REQUIRE(records->size() == 6);
  const auto& c = std::get<format::Checkpoint>((*records)[0].body);
  CHECK(c.hard_state == (raft::HardState{Term(3), NodeId(2), LogIndex(5)}));
  CHECK(c.snapshot.conf.learners == std::vector<NodeId>{NodeId(9)});
  CHECK(c.next_index == LogIndex(8));
  CHECK(std::get<format::TruncateRecord>((*records)[1].body).index == LogIndex(6));
  CHECK(std::get<raft::Entry>((*records)[2].body) == MakeEntry(6, 3, 100));
  CHECK(std::get<raft::Entry>((*records)[3].body).type == raft::EntryType::kConfChange);
  CHECK(std::get<raft::HardState>((*records)[4].body).vote == NodeId(1));
  CHECK(std::get<format::SnapshotRecord>((*records)[5].body).discard_log);
  // Offsets let a single record be decoded on its own (random-access reads).
  auto alone = format::DecodeRecord(payload, (*records)[2].offset);
  REQUIRE(alone.ok());
  CHECK(std::get<raft::Entry>(alone->body).index == LogIndex(6));
  // The count must match exactly.
  CHECK_FALSE(format::DecodePayload(payload, count - 1).ok());
  CHECK_FALSE(format::DecodePayload(payload, count + 1).ok());
}

TEST_CASE("segment names and headers", "[wal][format]") {
  CHECK(format::SegmentFileName(1) == "0000000000000001.wal");
  CHECK(format::ParseSegmentFileName("0000000000000042.wal") == std::optional<std::uint64_t>(42));
  CHECK_FALSE(format::ParseSegmentFileName("0000000000000042.wal.prealloc").has_value());
  CHECK_FALSE(format::ParseSegmentFileName("000000000000004x.wal").has_value());
  CHECK_FALSE(format::ParseSegmentFileName("0000000000000000.wal").has_value());
  const std::string h = format::EncodeSegmentHeader(7);
  CHECK(format::CheckSegmentHeader(h, 7).ok());
  CHECK(format::CheckSegmentHeader(h, 8).Is(StatusCode::kCorruption));
  std::string bad = h;
  bad[20] ^= 1;
  CHECK(format::CheckSegmentHeader(bad, 7).Is(StatusCode::kCorruption));
}

TEST_CASE("a frame is valid only at its own position in its own segment", "[wal][format]") {
  const std::string image = SampleSegment(3, 4096);
  format::FrameView view;
  std::string why;
  CHECK(format::CheckFrame(image, 3, 32, &view, nullptr, &why) == format::FrameCheck::kValid);
  CHECK(format::CheckFrame(image, 4, 32, &view, nullptr, &why) == format::FrameCheck::kInvalid);
  // The same bytes moved 8 bytes later are not a frame there.
  std::string moved = format::EncodeSegmentHeader(3) + std::string(8, '\0') + image.substr(32);
  CHECK(format::CheckFrame(moved, 3, 40, &view, nullptr, &why) == format::FrameCheck::kInvalid);
  CHECK(format::CheckFrame(image, 3, 2048, &view, nullptr, &why) == format::FrameCheck::kZero);
}

TEST_CASE("randomized reader: arbitrary bytes give a clean error, never a crash",
          "[wal][format][fuzz]") {
  std::mt19937_64 rng(20240601);
  for (int iter = 0; iter < 20000; ++iter) {
    std::string bytes(rng() % 300, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    // Plausible headers sometimes, so decoding goes deeper than the first check.
    if (bytes.size() >= 12 && (iter % 3) == 0) {
      const std::uint32_t len = static_cast<std::uint32_t>(bytes.size() - 12);
      std::memcpy(bytes.data() + 4, &len, 4);
      bytes[8] = static_cast<char>(1 + rng() % 5);
      bytes[9] = bytes[10] = bytes[11] = 0;
    }
    auto rec = format::DecodeRecord(bytes, 0);
    if (!rec.ok()) CHECK(rec.status().Is(StatusCode::kCorruption));
    auto payload = format::DecodePayload(bytes, static_cast<std::uint32_t>(rng()));
    if (!payload.ok()) CHECK(payload.status().Is(StatusCode::kCorruption));
    format::FrameView view;
    std::string why;
    (void)format::CheckFrame(bytes, rng() % 4, rng() % 64, &view, nullptr, &why);
    auto scan = ScanSegment(bytes, 1 + rng() % 3);
    if (!scan.ok()) CHECK(scan.status().Is(StatusCode::kCorruption));
  }
}

TEST_CASE("randomized reader: mutated segments never yield different data", "[wal][format][fuzz]") {
  const std::string original = SampleSegment(5, 1024);
  auto clean = ScanSegment(original, 5);
  REQUIRE(clean.ok());
  REQUIRE(clean->frames.size() == 1);
  // The checksummed bytes: frame header and payload (the zero padding after it is not data).
  const std::uint64_t frame_end = 32 + 32 + clean->frames[0].view.payload.size();
  std::mt19937_64 rng(99);
  int rejected = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string image = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const std::size_t at = rng() % image.size();
      if ((rng() & 1) != 0) {
        image[at] = static_cast<char>(image[at] ^ (1 << (rng() % 8)));
      } else {
        image[at] = static_cast<char>(rng());
      }
    }
    if ((iter % 5) == 0) image.resize(rng() % image.size());  // tearing at any byte
    auto scan = ScanSegment(image, 5);
    if (!scan.ok()) {
      CHECK(scan.status().Is(StatusCode::kCorruption));
      ++rejected;
      continue;
    }
    // Either the frame is rejected, or it is byte-for-byte the one written.
    if (!scan->frames.empty()) {
      REQUIRE(image.size() >= frame_end);
      REQUIRE(image.compare(32, frame_end - 32, original, 32, frame_end - 32) == 0);
    } else {
      ++rejected;
    }
  }
  CHECK(rejected > 0);
}

}  // namespace
}  // namespace epoch::wal
