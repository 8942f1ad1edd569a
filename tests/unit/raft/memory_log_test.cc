// MemoryLog against the LogReader contract (log_reader.h), and the ConfChange helpers.
#include "epoch/raft/memory_log.h"

#include <catch2/catch.hpp>

#include "epoch/raft/conf_change.h"
#include "test_cluster.h"

namespace epoch::raft::test {
namespace {

TEST_CASE("memory log: empty and bootstrapped logs", "[raft][memlog]") {
  MemoryLog empty;
  CHECK(empty.FirstIndex() == Idx(1));
  CHECK(empty.LastIndex() == Idx(0));
  CHECK(empty.TermAt(Idx(0)) == T(0));
  CHECK(empty.TermAt(Idx(1)) == std::nullopt);
  CHECK(empty.InitialHardState().IsEmpty());

  MemoryLog log = MemoryLog::Bootstrapped({Id(3), Id(1), Id(2)});
  CHECK(log.FirstIndex() == Idx(2));
  CHECK(log.LastIndex() == Idx(1));
  CHECK(log.TermAt(Idx(1)) == kBootstrapTerm);
  CHECK(log.TermAt(Idx(0)) == std::nullopt);  // compacted into the snapshot
  CHECK(log.LastSnapshot().conf.voters == std::vector<NodeId>{Id(1), Id(2), Id(3)});
  CHECK(log.InitialHardState() == HardState{kBootstrapTerm, kNoNode, kBootstrapIndex});
}

TEST_CASE("memory log: append truncates a conflicting suffix", "[raft][memlog]") {
  MemoryLog log = MemoryLog::Bootstrapped({Id(1)});
  log.Append(EntriesWithTerms(2, {1, 1, 2, 2}));
  CHECK(log.LastIndex() == Idx(5));
  CHECK(log.EntryBytes() == 8);
  log.Append(EntriesWithTerms(4, {3}));
  CHECK(log.LastIndex() == Idx(4));
  CHECK(log.TermAt(Idx(4)) == T(3));
  CHECK(log.TermAt(Idx(5)) == std::nullopt);
  CHECK(log.EntryBytes() == 6);
}

TEST_CASE("memory log: Entries respects max_bytes but returns at least one", "[raft][memlog]") {
  MemoryLog log = MemoryLog::Bootstrapped({Id(1)});
  std::vector<Entry> entries = EntriesWithTerms(2, {1, 1, 1, 1});
  for (Entry& e : entries) e.data = std::string(10, 'x');
  log.Append(entries);
  CHECK(log.Entries(Idx(2), Idx(6), 0).size() == 1);
  CHECK(log.Entries(Idx(2), Idx(6), 25).size() == 2);
  CHECK(log.Entries(Idx(2), Idx(6), 1000).size() == 4);
  CHECK(log.Entries(Idx(3), Idx(3), 1000).empty());
  CHECK(log.Entries(Idx(3), Idx(5), 1000).front().index == Idx(3));
}

TEST_CASE("memory log: compaction and snapshot install", "[raft][memlog]") {
  MemoryLog log = MemoryLog::Bootstrapped({Id(1)});
  log.Append(EntriesWithTerms(2, {1, 2, 2, 3}));
  ConfState conf{{Id(1)}, {Id(2)}};
  log.Compact(Idx(3), conf);
  CHECK(log.FirstIndex() == Idx(4));
  CHECK(log.LastSnapshot() == SnapshotMeta{Idx(3), T(2), conf});
  CHECK(log.TermAt(Idx(3)) == T(2));
  CHECK(log.TermAt(Idx(2)) == std::nullopt);
  CHECK(log.LastIndex() == Idx(5));
  log.Compact(Idx(2), conf);  // already compacted: no-op
  CHECK(log.FirstIndex() == Idx(4));

  log.ApplySnapshot(SnapshotMeta{Idx(10), T(4), conf});
  CHECK(log.FirstIndex() == Idx(11));
  CHECK(log.LastIndex() == Idx(10));
  CHECK(log.TermAt(Idx(10)) == T(4));
  CHECK(log.EntryBytes() == 0);
  log.Append(EntriesWithTerms(11, {4}));
  CHECK(log.LastIndex() == Idx(11));
}

TEST_CASE("conf change: encoding round trip and malformed input", "[raft][confchange]") {
  for (ConfChangeType type :
       {ConfChangeType::kAddLearner, ConfChangeType::kPromoteLearner, ConfChangeType::kRemoveNode,
        ConfChangeType::kAddVoter, ConfChangeType::kUpdateNode}) {
    ConfChange change{type, NodeId(0x0102030405060708ULL)};
    std::string data = EncodeConfChange(change);
    CHECK(data.size() == 9);
    CHECK(DecodeConfChange(data) == change);
    change.context = std::string("ctx\0bytes", 9);
    data = EncodeConfChange(change);
    CHECK(data.size() == 18);
    CHECK(DecodeConfChange(data) == change);
  }
  CHECK_FALSE(DecodeConfChange(""));
  CHECK_FALSE(DecodeConfChange(std::string(9, '\0')));  // type 0
  std::string bad = EncodeConfChange({ConfChangeType::kAddLearner, Id(1)});
  bad[0] = 7;
  CHECK_FALSE(DecodeConfChange(bad));
}

TEST_CASE("conf change: apply rules", "[raft][confchange]") {
  ConfState conf{{Id(1), Id(2)}, {}};
  auto added = ApplyConfChange(conf, {ConfChangeType::kAddLearner, Id(3)});
  REQUIRE(added.ok());
  CHECK(added->learners == std::vector<NodeId>{Id(3)});
  CHECK_FALSE(ApplyConfChange(*added, {ConfChangeType::kAddLearner, Id(3)}).ok());
  CHECK_FALSE(ApplyConfChange(*added, {ConfChangeType::kAddLearner, Id(1)}).ok());
  auto promoted = ApplyConfChange(*added, {ConfChangeType::kPromoteLearner, Id(3)});
  REQUIRE(promoted.ok());
  CHECK(promoted->voters == std::vector<NodeId>{Id(1), Id(2), Id(3)});
  CHECK(promoted->learners.empty());
  CHECK_FALSE(ApplyConfChange(*promoted, {ConfChangeType::kPromoteLearner, Id(3)}).ok());
  auto removed = ApplyConfChange(*promoted, {ConfChangeType::kRemoveNode, Id(2)});
  REQUIRE(removed.ok());
  CHECK(removed->voters == std::vector<NodeId>{Id(1), Id(3)});
  CHECK_FALSE(ApplyConfChange(ConfState{{Id(1)}, {}}, {ConfChangeType::kRemoveNode, Id(1)}).ok());
  CHECK_FALSE(ApplyConfChange(conf, {ConfChangeType::kRemoveNode, Id(9)}).ok());
  auto voter = ApplyConfChange(conf, {ConfChangeType::kAddVoter, Id(3)});
  REQUIRE(voter.ok());
  CHECK(voter->voters == std::vector<NodeId>{Id(1), Id(2), Id(3)});
  CHECK_FALSE(ApplyConfChange(*added, {ConfChangeType::kAddVoter, Id(3)}).ok());
  CHECK(ApplyConfChange(conf, {ConfChangeType::kUpdateNode, Id(2)}).ok());
  CHECK(*ApplyConfChange(conf, {ConfChangeType::kUpdateNode, Id(2)}) == conf);
  CHECK_FALSE(ApplyConfChange(conf, {ConfChangeType::kUpdateNode, Id(9)}).ok());
  CHECK(BootstrapSnapshot({Id(2), Id(1), Id(2)}).conf.voters == std::vector<NodeId>{Id(1), Id(2)});
}

}  // namespace
}  // namespace epoch::raft::test
