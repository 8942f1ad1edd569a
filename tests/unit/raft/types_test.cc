#include "epoch/raft/types.h"

#include <catch2/catch.hpp>

namespace epoch::raft {
namespace {

TEST_CASE("hard state emptiness and equality", "[raft]") {
  HardState hs;
  CHECK(hs.IsEmpty());
  hs.vote = NodeId(2);
  CHECK_FALSE(hs.IsEmpty());
  HardState other{Term(0), NodeId(2), LogIndex(0)};
  CHECK(hs == other);
  other.commit = LogIndex(1);
  CHECK_FALSE(hs == other);
}

TEST_CASE("snapshot meta is empty at index zero", "[raft]") {
  SnapshotMeta meta;
  CHECK(meta.IsEmpty());
  meta.index = LogIndex(5);
  meta.term = Term(2);
  meta.conf.voters = {NodeId(1), NodeId(2), NodeId(3)};
  CHECK_FALSE(meta.IsEmpty());
  CHECK(meta.conf.voters.size() == 3);
}

}  // namespace
}  // namespace epoch::raft
