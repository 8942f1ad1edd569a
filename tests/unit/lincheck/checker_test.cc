// Hand-written histories with known answers for lincheck::Check and the KV model.
#include "epoch/lincheck/checker.h"

#include <catch2/catch.hpp>

#include "epoch/lincheck/kv_model.h"
#include "history_builder.h"

namespace epoch::lincheck {
namespace {

using testing::HistoryBuilder;
constexpr std::int64_t kNever = kNeverReturned;

Verdict Run(const HistoryBuilder& h, Budget budget = {}) {
  return Check(KvModel{}, h.ops(), budget).verdict;
}

TEST_CASE("empty and sequential histories are linearizable", "[lincheck]") {
  CHECK(Run(HistoryBuilder{}) == Verdict::kOk);
  HistoryBuilder h;
  h.Put(0, 10, "x", "a").Get(20, 30, "x", KvOutput::Value("a", 1));
  h.Put(40, 50, "x", "b").Get(60, 70, "x", KvOutput::Value("b", 2));
  CHECK(Run(h) == Verdict::kOk);
}

TEST_CASE("stale read after a completed overwrite is rejected", "[lincheck]") {
  HistoryBuilder h;
  h.Put(0, 10, "x", "a").Put(20, 30, "x", "b").Get(40, 50, "x", KvOutput::Value("a"));
  CheckResult r = Check(KvModel{}, h.ops());
  CHECK(r.verdict == Verdict::kIllegal);
  CHECK(r.failing_partition == "x");
  // The report names the read that could not be placed and the state it would have needed.
  CHECK_THAT(r.description, Catch::Contains("get(x) -> \"a\""));
  CHECK_THAT(r.description, Catch::Contains("\"b\" (version 2)"));
}

TEST_CASE("lost write: a completed put is not seen by a later read", "[lincheck]") {
  HistoryBuilder h;
  h.Put(0, 10, "x", "a").Get(20, 30, "x", KvOutput::Absent());
  CHECK(Run(h) == Verdict::kIllegal);
}

TEST_CASE("read of a value never written is rejected", "[lincheck]") {
  HistoryBuilder h;
  h.Put(0, 10, "x", "a").Get(20, 30, "x", KvOutput::Value("zzz"));
  CHECK(Run(h) == Verdict::kIllegal);
}

TEST_CASE("reads overlapping a write may see either side, but not go back", "[lincheck]") {
  HistoryBuilder before_after;
  before_after.Put(0, 100, "x", "a")
      .Get(10, 20, "x", KvOutput::Absent())
      .Get(30, 40, "x", KvOutput::Value("a"));
  CHECK(Run(before_after) == Verdict::kOk);

  HistoryBuilder flicker;  // once a read saw the write, a later read cannot miss it
  flicker.Put(0, 100, "x", "a")
      .Get(10, 20, "x", KvOutput::Value("a"))
      .Get(30, 40, "x", KvOutput::Absent());
  CHECK(Run(flicker) == Verdict::kIllegal);

  HistoryBuilder concurrent_reads;  // overlapping reads may disagree in either order
  concurrent_reads.Put(0, 100, "x", "a")
      .Get(10, 50, "x", KvOutput::Value("a"), 1)
      .Get(20, 60, "x", KvOutput::Absent(), 2);
  CHECK(Run(concurrent_reads) == Verdict::kOk);
}

TEST_CASE("concurrent writes: any order, but one order for all readers", "[lincheck]") {
  HistoryBuilder a_last;
  a_last.Put(0, 50, "x", "a", 1).Put(0, 50, "x", "b", 2).Get(60, 70, "x", KvOutput::Value("a"));
  CHECK(Run(a_last) == Verdict::kOk);
  HistoryBuilder b_last;
  b_last.Put(0, 50, "x", "a", 1).Put(0, 50, "x", "b", 2).Get(60, 70, "x", KvOutput::Value("b"));
  CHECK(Run(b_last) == Verdict::kOk);
  HistoryBuilder both;
  both.Put(0, 50, "x", "a", 1)
      .Put(0, 50, "x", "b", 2)
      .Get(60, 70, "x", KvOutput::Value("a"))
      .Get(80, 90, "x", KvOutput::Value("b"));
  CHECK(Run(both) == Verdict::kIllegal);
}

TEST_CASE("intervals are closed: equal timestamps overlap", "[lincheck]") {
  HistoryBuilder touching;
  touching.Put(0, 10, "x", "a").Get(10, 20, "x", KvOutput::Absent());
  CHECK(Run(touching) == Verdict::kOk);
  HistoryBuilder apart;
  apart.Put(0, 10, "x", "a").Get(11, 20, "x", KvOutput::Absent());
  CHECK(Run(apart) == Verdict::kIllegal);
}

TEST_CASE("unknown-outcome writes may or may not have happened", "[lincheck]") {
  HistoryBuilder happened;
  happened.Put(0, kNever, "x", "a").Get(10, 20, "x", KvOutput::Value("a"));
  CHECK(Run(happened) == Verdict::kOk);

  HistoryBuilder did_not;
  did_not.Put(0, kNever, "x", "a").Get(10, 20, "x", KvOutput::Absent());
  CHECK(Run(did_not) == Verdict::kOk);

  HistoryBuilder late;  // it may take effect long after the client gave up
  late.Put(0, kNever, "x", "a")
      .Get(10, 20, "x", KvOutput::Absent())
      .Get(1000, 1010, "x", KvOutput::Value("a"));
  CHECK(Run(late) == Verdict::kOk);

  HistoryBuilder undone;  // but once seen it stays
  undone.Put(0, kNever, "x", "a")
      .Get(10, 20, "x", KvOutput::Value("a"))
      .Get(30, 40, "x", KvOutput::Absent());
  CHECK(Run(undone) == Verdict::kIllegal);

  HistoryBuilder before_call;  // and it cannot be seen before it was called
  before_call.Get(0, 10, "x", KvOutput::Value("a")).Put(20, kNever, "x", "a");
  CHECK(Run(before_call) == Verdict::kIllegal);

  HistoryBuilder unknown_cas;  // an unknown cas takes the outcome the state dictates
  unknown_cas.Put(0, 10, "x", "a")
      .Add(20, kNever, KvInput::Cas("x", "a", "b"), KvOutput::None(), 3)
      .Get(30, 40, "x", KvOutput::Value("b", 2));
  CHECK(Run(unknown_cas) == Verdict::kOk);

  HistoryBuilder unknown_cas_mismatch;  // ... so it cannot write when the compare fails
  unknown_cas_mismatch.Put(0, 10, "x", "z")
      .Add(20, kNever, KvInput::Cas("x", "a", "b"), KvOutput::None(), 3)
      .Get(30, 40, "x", KvOutput::Value("b"));
  CHECK(Run(unknown_cas_mismatch) == Verdict::kIllegal);
}

TEST_CASE("cas: outcome must match the compare", "[lincheck]") {
  HistoryBuilder ok;
  ok.Cas(0, 10, "x", std::nullopt, "a", true)  // create if absent
      .Cas(20, 30, "x", "a", "b", true)
      .Cas(40, 50, "x", "a", "c", false)
      .Get(60, 70, "x", KvOutput::Value("b", 2));
  CHECK(Run(ok) == Verdict::kOk);

  HistoryBuilder wrong_success;
  wrong_success.Put(0, 10, "x", "a").Cas(20, 30, "x", "z", "b", true);
  CHECK(Run(wrong_success) == Verdict::kIllegal);

  HistoryBuilder wrong_failure;
  wrong_failure.Put(0, 10, "x", "a").Cas(20, 30, "x", "a", "b", false);
  CHECK(Run(wrong_failure) == Verdict::kIllegal);

  HistoryBuilder create_exists;
  create_exists.Put(0, 10, "x", "a").Cas(20, 30, "x", std::nullopt, "b", true);
  CHECK(Run(create_exists) == Verdict::kIllegal);

  HistoryBuilder racing;  // two concurrent cas from the same value: exactly one may win
  racing.Put(0, 10, "x", "a")
      .Cas(20, 40, "x", "a", "b", true, 1)
      .Cas(20, 40, "x", "a", "c", true, 2);
  CHECK(Run(racing) == Verdict::kIllegal);
}

TEST_CASE("versions and deletes follow etcd's per-key version", "[lincheck]") {
  HistoryBuilder ok;
  ok.Put(0, 10, "x", "a")
      .Put(20, 30, "x", "b")
      .Get(40, 50, "x", KvOutput::Value("b", 2))
      .Delete(60, 70, "x", true)
      .Delete(80, 90, "x", false)
      .Get(100, 110, "x", KvOutput::Absent())
      .Put(120, 130, "x", "c")
      .Get(140, 150, "x", KvOutput::Value("c", 1));
  CHECK(Run(ok) == Verdict::kOk);

  HistoryBuilder wrong_version;
  wrong_version.Put(0, 10, "x", "a")
      .Put(20, 30, "x", "b")
      .Get(40, 50, "x", KvOutput::Value("b", 3));
  CHECK(Run(wrong_version) == Verdict::kIllegal);

  HistoryBuilder phantom_delete;
  phantom_delete.Delete(0, 10, "x", true);
  CHECK(Run(phantom_delete) == Verdict::kIllegal);

  HistoryBuilder unreported_delete;
  unreported_delete.Delete(0, 10, "x", std::nullopt);
  CHECK(Run(unreported_delete) == Verdict::kOk);
}

TEST_CASE("histories are partitioned per key", "[lincheck]") {
  HistoryBuilder h;
  h.Put(0, 10, "a", "1").Get(20, 30, "a", KvOutput::Value("1"));
  h.Put(0, 10, "b", "2").Get(20, 30, "b", KvOutput::Absent());  // lost write on b
  h.Put(0, 10, "c", "3").Get(20, 30, "c", KvOutput::Value("3"));
  CheckResult r = Check(KvModel{}, h.ops());
  CHECK(r.verdict == Verdict::kIllegal);
  CHECK(r.failing_partition == "b");
  CHECK(r.partitions == 2);  // stops at the first illegal partition, in key order
  CHECK(r.operations == 6);

  HistoryBuilder good;
  good.Put(0, 10, "a", "1").Put(0, 10, "b", "2").Get(20, 30, "a", KvOutput::Value("1", 1));
  CheckResult rg = Check(KvModel{}, good.ops());
  CHECK(rg.verdict == Verdict::kOk);
  CHECK(rg.partitions == 2);
  CHECK(rg.max_partition_ops == 2);

  // Without partitioning, a value seen on another key would be a cross-key read; make sure a
  // read on "a" cannot be satisfied by a write on "b".
  HistoryBuilder cross;
  cross.Put(0, 10, "b", "v").Get(20, 30, "a", KvOutput::Value("v"));
  CHECK(Run(cross) == Verdict::kIllegal);
}

// Many concurrent writes followed by an impossible read: the search must try (almost) every
// subset of the writes before it can prove the read illegal, which takes many steps.
HistoryBuilder HardIllegalHistory(int writers) {
  HistoryBuilder h;
  for (int i = 0; i < writers; ++i) {
    h.Put(0, 1000, "x", "v" + std::to_string(i), static_cast<std::uint64_t>(i));
  }
  h.Get(0, 1000, "x", KvOutput::Value("never-written"), 99);
  return h;
}

TEST_CASE("a spent budget gives kUnknown, never a pass", "[lincheck]") {
  HistoryBuilder h = HardIllegalHistory(12);
  CheckResult full = Check(KvModel{}, h.ops());
  REQUIRE(full.verdict == Verdict::kIllegal);
  REQUIRE(full.steps > 5000);

  CheckResult by_steps = Check(KvModel{}, h.ops(), Budget{{}, 100});
  CHECK(by_steps.verdict == Verdict::kUnknown);
  CHECK(by_steps.failing_partition == "x");
  CHECK_THAT(by_steps.description, Catch::Contains("not a pass"));

  // The deadline is checked every 1024 steps; 1 ns has passed by then.
  CheckResult by_time = Check(KvModel{}, h.ops(), Budget{std::chrono::nanoseconds(1), 0});
  CHECK(by_time.verdict == Verdict::kUnknown);

  // A linearizable history with the same budget is still unknown if it needs more steps...
  HistoryBuilder ok;
  for (int i = 0; i < 200; ++i) {
    ok.Put(i * 10, i * 10 + 5, "x", "v" + std::to_string(i));
  }
  CHECK(Check(KvModel{}, ok.ops(), Budget{{}, 100}).verdict == Verdict::kUnknown);
  // ... and ok with enough budget.
  CHECK(Check(KvModel{}, ok.ops(), Budget{{}, 100000}).verdict == Verdict::kOk);
}

TEST_CASE("malformed history (return before call) is not a pass", "[lincheck]") {
  HistoryBuilder h;
  h.Put(10, 5, "x", "a");
  CheckResult r = Check(KvModel{}, h.ops());
  CHECK(r.verdict == Verdict::kUnknown);
  CHECK_THAT(r.description, Catch::Contains("malformed"));
}

TEST_CASE("the report shows the longest prefix and the blocked candidates", "[lincheck]") {
  HistoryBuilder h;
  h.Put(0, 10, "x", "a", 1)
      .Put(20, 30, "x", "b", 2)
      .Get(40, 50, "x", KvOutput::Value("b", 2), 3)
      .Get(60, 70, "x", KvOutput::Value("a", 1), 4)  // stale
      .Put(65, 200, "x", "c", 5);
  CheckResult r = Check(KvModel{}, h.ops());
  REQUIRE(r.verdict == Verdict::kIllegal);
  // put a, put b, get b, put c can be ordered; the stale read then fits nowhere.
  CHECK_THAT(r.description, Catch::Contains("longest linearizable prefix has 4"));
  CHECK_THAT(r.description, Catch::Contains("client 5 [65, 200] put(x, \"c\")"));
  CHECK_THAT(r.description, Catch::Contains("state after the prefix: \"c\" (version 3)"));
  CHECK_THAT(r.description, Catch::Contains("returned before it could be linearized:\n"
                                            "  client 4 [60, 70] get(x) -> \"a\" (version 1)"));
}

}  // namespace
}  // namespace epoch::lincheck
