// Hand-written histories for lincheck::CheckRevisions: legal ones pass, and each rule has a history
// that breaks it alone and is reported under its name.
#include "epoch/lincheck/revision_checker.h"

#include <catch2/catch.hpp>

#include "rev_history_builder.h"

namespace epoch::lincheck {
namespace {

using testing::Kv;
using testing::RevHistoryBuilder;
using testing::Rules;
using Set = std::set<std::string>;

// Histories here start on an empty etcd store: revision 1, the first write takes 2.
RevisionCheckResult Run(const RevHistoryBuilder& h, RevisionCheckOptions o = {}) {
  if (o.start_revision == 0) o.start_revision = 1;
  RevisionCheckResult r = CheckRevisions(h.ops(), o);
  INFO(r.Describe());
  return r;
}

Set Only(std::string_view rule) { return Set{std::string(rule)}; }

TEST_CASE("revisions: sequential puts, reads and deletes replay exactly", "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "x", "a", 2)
      .Get(20, 30, "x", 2, {Kv("x", "a", 2, 2, 1)})
      .Put(40, 50, "x", "b", 3)
      .Get(60, 70, "x", 3, {Kv("x", "b", 2, 3, 2)})
      .Delete(80, 90, "x", {}, 4, 1)
      .Get(100, 110, "x", 4, {})
      .Put(120, 130, "x", "c", 5)
      .Get(140, 150, "x", 5, {Kv("x", "c", 5, 5, 1)})
      .Delete(160, 170, "nothing-here", {}, 5, 0);
  RevisionCheckResult r = Run(h);
  CHECK(r.Ok());
  CHECK(r.writes == 4);
  CHECK(r.operations == 9);
}

TEST_CASE("revisions: concurrent writes may take either order", "[lincheck][revision]") {
  for (bool a_first : {true, false}) {
    RevHistoryBuilder h;
    std::int64_t ra = a_first ? 2 : 3, rb = a_first ? 3 : 2;
    std::string last = a_first ? "b" : "a";
    h.Put(0, 50, "x", "a", ra, 1)
        .Put(10, 60, "x", "b", rb, 2)
        .Get(20, 30, "x", 2, {Kv("x", a_first ? "a" : "b", 2, 2, 1)}, 3)
        .Get(70, 80, "x", 3, {Kv("x", last, 2, 3, 2)}, 3);
    CHECK(Run(h).Ok());
  }
}

TEST_CASE("revisions: a read overlapping a write may be answered before it",
          "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "x", "a", 2).Put(20, 100, "x", "b", 3).Get(30, 40, "x", 2, {Kv("x", "a", 2, 2, 1)});
  CHECK(Run(h).Ok());
}

TEST_CASE("revisions: an unknown-outcome write a read observed fills its revision",
          "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "x", "a", 2)
      .UnknownPut(20, "x", "u")
      .Get(30, 40, "x", 3, {Kv("x", "u", 2, 3, 2)})
      .Put(50, 60, "x", "b", 4)
      .Get(70, 80, "x", 4, {Kv("x", "b", 2, 4, 3)});
  RevisionCheckResult r = Run(h);
  CHECK(r.Ok());
  CHECK(r.unknown == 1);
  CHECK(r.observed == 1);
  CHECK(r.writes == 3);
}

TEST_CASE("revisions: an unobserved unknown-outcome write may fill a gap, or not have happened",
          "[lincheck][revision]") {
  RevHistoryBuilder took_gap;  // it took revision 3: x's version is one higher than replayed
  took_gap.Put(0, 10, "x", "a", 2)
      .UnknownPut(20, "x", "u")
      .Put(30, 40, "x", "b", 4)
      .Get(50, 60, "x", 4, {Kv("x", "b", 2, 4, 3)});
  CHECK(Run(took_gap).Ok());

  RevHistoryBuilder never;  // it never happened: no gap, exact version
  never.Put(0, 10, "x", "a", 2)
      .UnknownPut(20, "x", "u")
      .Put(30, 40, "x", "b", 3)
      .Get(50, 60, "x", 3, {Kv("x", "b", 2, 3, 2)});
  CHECK(Run(never).Ok());

  RevHistoryBuilder created;  // it created y at revision 3, then a known put overwrote it
  created.UnknownPut(0, "y", "u")
      .Put(10, 20, "x", "a", 2)
      .Put(30, 40, "y", "b", 4)
      .Get(50, 60, "y", 4, {Kv("y", "b", 3, 4, 2)});
  CHECK(Run(created).Ok());
}

TEST_CASE("revisions: an unobserved put relaxes only what it could have changed",
          "[lincheck][revision]") {
  std::vector<std::vector<RevKeyValue>> wrong = {
      {Kv("x", "b", 2, 4, 1)},  // version below the replay's: a put only raises it
      {Kv("x", "b", 3, 4, 2)},  // created later than the replay's: a put only makes it earlier
      {Kv("x", "a", 2, 2, 1)},  // stale value
      {},                       // a put cannot delete
  };
  for (const auto& kvs : wrong) {
    RevHistoryBuilder h;
    h.Put(0, 10, "x", "a", 2).UnknownPut(20, "x", "u").Put(30, 40, "x", "b", 4);
    h.Get(50, 60, "x", 4, kvs);
    CHECK(Rules(Run(h)) == Only(kRuleRangeState));
  }
}

TEST_CASE("revisions: an unknown-outcome delete makes its key's presence uncertain",
          "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "x", "a", 2)
      .Add(20, kNeverReturned, RevInput::DeleteRange("x"), RevOutput{}, 1)
      .Put(30, 40, "y", "b", 4)
      .Get(50, 60, "x", 4, {});
  CHECK(Run(h).Ok());
}

TEST_CASE("revisions: a multi-key txn writes all its keys at one revision",
          "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "x", "old", 2)
      .Txn(20, 30, {RevCompare{"x", "old"}},
           {RevMutation::Put("x", "x1"), RevMutation::Put("y", "y1")}, {}, 3, true)
      .Range(40, 50, "x", "z", 3, {Kv("x", "x1", 2, 3, 2), Kv("y", "y1", 3, 3, 1)})
      .Txn(60, 70, {RevCompare{"x", "old"}}, {RevMutation::Put("x", "x2")}, {}, 3, false)
      .Txn(80, 90, {RevCompare{"z", std::nullopt}}, {RevMutation::Put("z", "z1")}, {}, 4, true)
      .Range(100, 110, "a", kRangeToEnd, 4,
             {Kv("x", "x1", 2, 3, 2), Kv("y", "y1", 3, 3, 1), Kv("z", "z1", 4, 4, 1)});
  CHECK(Run(h).Ok());
}

TEST_CASE("revisions: an unknown-outcome txn observed through one key applies all its keys",
          "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Add(0, kNeverReturned,
        RevInput::Txn({}, {RevMutation::Put("x", "x1"), RevMutation::Put("y", "y1")}), RevOutput{},
        1)
      .Get(10, 20, "x", 2, {Kv("x", "x1", 2, 2, 1)})
      .Get(30, 40, "y", 2, {Kv("y", "y1", 2, 2, 1)});
  CHECK(Run(h).Ok());

  RevHistoryBuilder torn = h;  // the other key missing at the same revision: not atomic
  torn.Get(50, 60, "y", 2, {});
  CHECK(Rules(Run(torn)) == Only(kRuleRangeState));
}

TEST_CASE("revisions: DeleteRange removes every key in its range at one revision",
          "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "a", "1", 2)
      .Put(20, 30, "b", "2", 3)
      .Put(40, 50, "c", "3", 4)
      .Delete(60, 70, "a", "c", 5, 2)
      .Range(80, 90, "a", kRangeToEnd, 5, {Kv("c", "3", 4, 4, 1)})
      .Put(100, 110, "a", "4", 6)
      .Range(120, 130, "a", "b", 6, {Kv("a", "4", 6, 6, 1)});
  CHECK(Run(h).Ok());

  RevHistoryBuilder survivor = h;  // b still there after the delete
  survivor.Range(140, 150, "b", {}, 6, {Kv("b", "2", 3, 3, 1)});
  CHECK(Rules(Run(survivor)) == Only(kRuleRangeState));
}

TEST_CASE("revisions: serializable reads are exempt from real time but not from the state",
          "[lincheck][revision]") {
  RevHistoryBuilder stale;
  stale.Put(0, 10, "x", "a", 2).Range(20, 30, "x", {}, 1, {}, 0, true);
  CHECK(Run(stale).Ok());

  RevHistoryBuilder wrong;
  wrong.Put(0, 10, "x", "a", 2).Range(20, 30, "x", {}, 2, {Kv("x", "zzz", 2, 2, 1)}, 0, true);
  CHECK(Rules(Run(wrong)) == Only(kRuleRangeState));
}

TEST_CASE("revisions: other writers may fill gaps", "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "x", "a", 2).Put(20, 30, "x", "b", 7).Get(40, 50, "x", 9, {Kv("x", "b", 2, 7, 2)});
  RevisionCheckOptions others;
  others.other_writers = true;
  CHECK(Run(h, others).Ok());
  CHECK(Rules(Run(h)) == Only(kRuleGapFree));
}

// ---- each rule broken alone ----

TEST_CASE("rule unique-revision: two writes with one revision", "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 50, "x", "a", 2, 1).Put(10, 60, "y", "b", 2, 2);
  RevisionCheckResult r = Run(h);
  CHECK(Rules(r) == Only(kRuleUniqueRevision));
  CHECK_THAT(r.Describe(), Catch::Contains("put(x, \"a\")") && Catch::Contains("put(y, \"b\")"));
}

TEST_CASE("rule unique-revision: one unknown-outcome write observed at two revisions",
          "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "z", "0", 2)
      .Add(20, kNeverReturned,
           RevInput::Txn({}, {RevMutation::Put("x", "x1"), RevMutation::Put("y", "y1")}),
           RevOutput{}, 1)
      .Put(30, 40, "z", "1", 3)
      .Put(50, 60, "z", "2", 4)
      .Range(70, 80, "x", "z", 4, {Kv("x", "x1", 3, 3, 1), Kv("y", "y1", 4, 4, 1)});
  CHECK(Rules(Run(h)).count(std::string(kRuleUniqueRevision)) == 1);
}

TEST_CASE("rule gap-free: a revision nobody can have taken", "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "x", "a", 2).Put(20, 30, "x", "b", 4).Get(40, 50, "x", 4, {Kv("x", "b", 2, 4, 2)});
  CHECK(Rules(Run(h)) == Only(kRuleGapFree));

  // An unknown-outcome write invoked after revision 4 completed cannot fill revision 3.
  RevHistoryBuilder late = h;
  late.UnknownPut(60, "y", "u");
  CHECK(Rules(Run(late)) == Only(kRuleGapFree));

  // Invoked before, it can.
  RevHistoryBuilder early = h;
  early.UnknownPut(15, "y", "u");
  CHECK(Run(early).Ok());

  // A read answered above every write also needs its revision filled.
  RevHistoryBuilder read_ahead;
  read_ahead.Put(0, 10, "x", "a", 2).Get(20, 30, "x", 3, {Kv("x", "a", 2, 2, 1)});
  CHECK(Rules(Run(read_ahead)) == Only(kRuleGapFree));
}

TEST_CASE("rule write-order: a later write took a lower revision", "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "x", "a", 3).Put(20, 30, "y", "b", 2);
  RevisionCheckResult r = Run(h);
  CHECK(Rules(r) == Only(kRuleWriteOrder));
  CHECK_THAT(r.Describe(), Catch::Contains("put(x, \"a\")") && Catch::Contains("put(y, \"b\")"));
}

TEST_CASE("rule read-after-write: a read invoked after a write misses its revision",
          "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "x", "a", 2).Get(20, 30, "y", 1, {});
  CHECK(Rules(Run(h)) == Only(kRuleReadAfterWrite));
}

TEST_CASE("rule write-after-read: a write invoked after a read took a revision it saw",
          "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 100, "a", "1", 2, 1)
      .Put(0, 100, "b", "2", 4, 2)
      .Get(0, 10, "k", 3, {}, 3)
      .Put(20, 100, "c", "3", 3, 3);
  CHECK(Rules(Run(h)) == Only(kRuleWriteAfterRead));
}

TEST_CASE("rule read-after-read: a later read goes back in revisions", "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 100, "a", "1", 2, 1)
      .Get(10, 20, "a", 2, {Kv("a", "1", 2, 2, 1)}, 2)
      .Get(30, 40, "a", 1, {}, 2);
  CHECK(Rules(Run(h)) == Only(kRuleReadAfterRead));
}

TEST_CASE("rule range-state: value, presence, create, mod and version are replayed exactly",
          "[lincheck][revision]") {
  auto base = [] {
    RevHistoryBuilder h;
    h.Put(0, 10, "x", "a", 2).Put(20, 30, "x", "b", 3);
    return h;
  };
  std::vector<std::vector<RevKeyValue>> wrong = {
      {Kv("x", "a", 2, 2, 1)},                          // stale value
      {Kv("x", "b", 2, 3, 1)},                          // version not counted
      {Kv("x", "b", 3, 3, 2)},                          // create_revision moved
      {Kv("x", "b", 2, 2, 2)},                          // mod_revision of the older write
      {},                                               // key missing
      {Kv("x", "b", 2, 3, 2), Kv("x2", "q", 3, 3, 1)},  // a key nobody wrote
  };
  for (const auto& kvs : wrong) {
    RevHistoryBuilder h = base();
    h.Range(40, 50, "x", "y", 3, kvs);
    RevisionCheckResult r = Run(h);
    CHECK(Rules(r) == Only(kRuleRangeState));
    CHECK_THAT(r.Describe(), Catch::Contains("x=\"b\" (create 2, mod 3, version 2)"));
  }
}

TEST_CASE("rule delete-count: deleted keys must be the keys in range", "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "a", "1", 2).Put(20, 30, "b", "2", 3).Delete(40, 50, "a", "c", 4, 1);
  CHECK(Rules(Run(h)) == Only(kRuleDeleteCount));

  RevHistoryBuilder nothing;
  nothing.Put(0, 10, "a", "1", 2).Delete(20, 30, "a", {}, 2, 0);
  CHECK(Rules(Run(nothing)) == Only(kRuleDeleteCount));
}

TEST_CASE("rule txn-compare: the branch must follow the compares", "[lincheck][revision]") {
  RevHistoryBuilder wrong_then;
  wrong_then.Put(0, 10, "x", "a", 2)
      .Txn(20, 30, {RevCompare{"x", "zzz"}}, {RevMutation::Put("x", "b")}, {}, 3, true);
  CHECK(Rules(Run(wrong_then)) == Only(kRuleTxnCompare));

  RevHistoryBuilder wrong_else;  // a failed CAS whose compare held at its header
  wrong_else.Put(0, 10, "x", "a", 2)
      .Txn(20, 30, {RevCompare{"x", "a"}}, {RevMutation::Put("x", "b")}, {}, 2, false);
  CHECK(Rules(Run(wrong_else)) == Only(kRuleTxnCompare));

  RevHistoryBuilder create;  // create-if-absent succeeding on an existing key
  create.Put(0, 10, "x", "a", 2)
      .Txn(20, 30, {RevCompare{"x", std::nullopt}}, {RevMutation::Put("x", "b")}, {}, 3, true);
  CHECK(Rules(Run(create)) == Only(kRuleTxnCompare));
}

TEST_CASE("rule malformed: an acknowledged operation without a revision", "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "x", "a", 0);
  CHECK(Rules(Run(h)) == Only(kRuleMalformed));
}

// The mutation check: in a sequential history every recorded revision and every returned
// create/mod/version is pinned down, so corrupting any one of them by +-1 must be caught.
TEST_CASE("revisions: corrupting any one recorded revision is caught", "[lincheck][revision]") {
  RevHistoryBuilder h;
  h.Put(0, 10, "x", "a", 2)
      .Txn(20, 30, {RevCompare{"x", "a"}}, {RevMutation::Put("x", "b"), RevMutation::Put("y", "c")},
           {}, 3, true)
      .Range(40, 50, "x", "z", 3, {Kv("x", "b", 2, 3, 2), Kv("y", "c", 3, 3, 1)})
      .Delete(60, 70, "x", {}, 4, 1)
      .Get(80, 90, "y", 4, {Kv("y", "c", 3, 3, 1)})
      .Put(100, 110, "x", "d", 5)
      .Get(120, 130, "x", 5, {Kv("x", "d", 5, 5, 1)});
  REQUIRE(Run(h).Ok());
  int mutants = 0;
  for (std::size_t i = 0; i < h.ops().size(); ++i) {
    for (int delta : {-1, 1}) {
      RevHistoryBuilder m = h;
      m.mutable_ops()[i].output.header_revision += delta;
      CHECK_FALSE(Run(m).Ok());
      ++mutants;
      for (std::size_t k = 0; k < h.ops()[i].output.kvs.size(); ++k) {
        for (auto field :
             {&RevKeyValue::create_revision, &RevKeyValue::mod_revision, &RevKeyValue::version}) {
          RevHistoryBuilder f = h;
          f.mutable_ops()[i].output.kvs[k].*field += delta;
          CHECK_FALSE(Run(f).Ok());
          ++mutants;
        }
      }
    }
  }
  CHECK(mutants == 14 + 2 * 3 * 4);
}

}  // namespace
}  // namespace epoch::lincheck
