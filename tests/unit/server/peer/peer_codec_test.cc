#include "epoch/peer/peer_codec.h"

#include <catch2/catch.hpp>
#include <functional>
#include <limits>
#include <vector>

namespace epoch::server {
namespace {

raft::Message FullMessage() {
  raft::Message m;
  m.type = raft::MessageType::kAppendEntries;
  m.from = NodeId(1);
  m.to = NodeId(2);
  m.term = Term(7);
  m.log_term = Term(6);
  m.index = LogIndex(41);
  m.entries = {
      raft::Entry{Term(7), LogIndex(42), raft::EntryType::kNormal, "put"},
      raft::Entry{Term(7), LogIndex(43), raft::EntryType::kConfChange, std::string("\x01\x02", 2)},
      raft::Entry{Term(7), LogIndex(44), raft::EntryType::kNormal, ""}};
  m.commit = LogIndex(40);
  m.reject = true;
  m.reject_hint = LogIndex(39);
  m.round = 12345;
  m.context = 99;
  m.transfer = true;
  m.via_lease = true;
  m.snapshot = raft::SnapshotMeta{LogIndex(30), Term(5), {{NodeId(1), NodeId(2)}, {NodeId(3)}}};
  return m;
}

TEST_CASE("peer codec: every field survives the round trip", "[server][codec]") {
  raft::Message m = FullMessage();
  Result<raft::Message> back = DecodeFrame(EncodeFrame(m));
  REQUIRE(back.ok());
  CHECK(*back == m);
}

TEST_CASE("peer codec: every message type maps both ways", "[server][codec]") {
  for (int t = 0; t <= static_cast<int>(raft::MessageType::kReadIndexResponse); ++t) {
    raft::Message m = FullMessage();
    m.type = static_cast<raft::MessageType>(t);
    Result<raft::Message> back = DecodeFrame(EncodeFrame(m));
    REQUIRE(back.ok());
    CHECK(back->type == m.type);
  }
}

TEST_CASE("peer codec: garbage and malformed frames are refused, not trusted", "[server][codec]") {
  CHECK_FALSE(DecodeFrame("\xff\xff\xff garbage").ok());
  CHECK_FALSE(DecodeFrame("").ok());  // an empty frame carries no message

  raftpb::Message unknown;
  unknown.set_type(static_cast<raftpb::MessageType>(77));
  CHECK(DecodeMessage(unknown).status().Is(StatusCode::kInvalidArgument));

  raftpb::Message snapshot_without_meta;
  snapshot_without_meta.set_type(raftpb::INSTALL_SNAPSHOT);
  CHECK_FALSE(DecodeMessage(snapshot_without_meta).ok());

  raftpb::Message bad_entry;
  bad_entry.set_type(raftpb::APPEND_ENTRIES);
  bad_entry.add_entries()->set_type(static_cast<raftpb::EntryType>(9));
  CHECK_FALSE(DecodeMessage(bad_entry).ok());
}

TEST_CASE("peer codec: terms and indexes at or above 2^62 are refused at decode time",
          "[server][codec]") {
  const std::uint64_t huge[] = {raft::kMaxPlausibleValue,
                                std::numeric_limits<std::uint64_t>::max()};
  for (std::uint64_t v : huge) {
    std::vector<std::function<void(raft::Message&)>> poison = {
        [v](raft::Message& m) { m.term = Term(v); },
        [v](raft::Message& m) { m.log_term = Term(v); },
        [v](raft::Message& m) { m.index = LogIndex(v); },
        [v](raft::Message& m) { m.commit = LogIndex(v); },
        [v](raft::Message& m) { m.reject_hint = LogIndex(v); },
        [v](raft::Message& m) { m.entries[1].term = Term(v); },
        [v](raft::Message& m) { m.entries[2].index = LogIndex(v); },
        [v](raft::Message& m) { m.snapshot->term = Term(v); },
        [v](raft::Message& m) { m.snapshot->index = LogIndex(v); },
    };
    for (const auto& apply : poison) {
      raft::Message m = FullMessage();
      apply(m);
      Result<raft::Message> back = DecodeFrame(EncodeFrame(m));
      CHECK(back.status().Is(StatusCode::kInvalidArgument));
    }
  }
  raft::Message edge = FullMessage();
  edge.term = Term(raft::kMaxPlausibleValue - 1);
  CHECK(DecodeFrame(EncodeFrame(edge)).ok());
}

}  // namespace
}  // namespace epoch::server
