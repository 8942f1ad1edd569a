// KvStateMachine's applied hooks (a list: Watch, Lock/Election waiters and others each register
// one) and RecipeEventFeed, which wakes Lock and Election waiters: every applied entry reaches
// every hook in order; a feed subscriber sees exactly the events under its prefix, stops after
// Unsubscribe, and is told to re-read on Resync.
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "epoch/api/recipe_wait.h"
#include "epoch/replication/kv_state_machine.h"
#include "snapshot_test_util.h"

namespace epoch::server {
namespace {

using snapshot_testing::TempDir;

raft::Entry PutEntry(std::uint64_t index, const std::string& key, const std::string& value) {
  v1::InternalRequest request;
  request.set_request_id(index);
  request.mutable_put()->set_key(key);
  request.mutable_put()->set_value(value);
  return raft::Entry{Term(2), LogIndex(index), raft::EntryType::kNormal,
                     request.SerializeAsString()};
}

raft::Entry DeleteEntry(std::uint64_t index, const std::string& key) {
  v1::InternalRequest request;
  request.set_request_id(index);
  request.mutable_delete_range()->set_key(key);
  return raft::Entry{Term(2), LogIndex(index), raft::EntryType::kNormal,
                     request.SerializeAsString()};
}

mvccpb::Event Event(mvccpb::Event::EventType type, const std::string& key) {
  mvccpb::Event e;
  e.set_type(type);
  e.mutable_kv()->set_key(key);
  return e;
}

TEST_CASE("KvStateMachine runs every applied hook, in order, for each applied entry",
          "[node][recipe]") {
  TempDir dir;
  auto store = KvStore::Open(dir.Sub("kv"), KvStoreOptions{});
  REQUIRE(store.ok());
  KvStateMachine machine(**store);
  std::vector<std::string> calls;
  machine.AddAppliedHook([&](LogIndex index, const ApplyResult& r) {
    calls.push_back(fmt::format("first {} rev {} events {}", index.value(), r.revision.value(),
                                r.events.size()));
  });
  machine.AddAppliedHook([&](LogIndex index, const ApplyResult& r) {
    calls.push_back(fmt::format("second {} rev {} events {}", index.value(), r.revision.value(),
                                r.events.size()));
  });
  const std::vector<raft::Entry> entries{PutEntry(2, "a", "1"), PutEntry(3, "b", "2"),
                                         DeleteEntry(4, "a")};
  std::vector<ApplyOutcome> out = machine.Apply(entries);
  REQUIRE(out.size() == 3);
  CHECK(calls == std::vector<std::string>{"first 2 rev 2 events 1", "second 2 rev 2 events 1",
                                          "first 3 rev 3 events 1", "second 3 rev 3 events 1",
                                          "first 4 rev 4 events 1", "second 4 rev 4 events 1"});
}

TEST_CASE("RecipeEventFeed delivers the events under each prefix, until unsubscribed",
          "[node][recipe]") {
  RecipeEventFeed feed;
  std::vector<std::string> lock_seen;
  std::vector<std::string> other_seen;
  int resyncs = 0;
  auto record = [&resyncs](std::vector<std::string>* seen) {
    return [seen, &resyncs](Revision rev, const std::vector<mvccpb::Event>& events, bool resync) {
      if (resync) {
        ++resyncs;
        return;
      }
      for (const auto& e : events) {
        seen->push_back(fmt::format("{}:{}:{}", rev.value(),
                                    e.type() == mvccpb::Event::PUT ? "put" : "del", e.kv().key()));
      }
    };
  };
  const std::uint64_t lock_id = feed.Subscribe("lock/", record(&lock_seen));
  feed.Subscribe("other/", record(&other_seen));
  CHECK(feed.subscribers() == 2);

  feed.Publish(Revision(5), {Event(mvccpb::Event::PUT, "lock/1"), Event(mvccpb::Event::PUT, "x"),
                             Event(mvccpb::Event::DELETE, "other/9")});
  feed.Publish(Revision(6), {Event(mvccpb::Event::DELETE, "lock/1")});
  feed.Publish(Revision(7), {});  // an entry without events reaches nobody
  feed.Publish(Revision(8), {Event(mvccpb::Event::PUT, "lock")});  // not under "lock/"
  CHECK(lock_seen == std::vector<std::string>{"5:put:lock/1", "6:del:lock/1"});
  CHECK(other_seen == std::vector<std::string>{"5:del:other/9"});

  feed.Resync();
  CHECK(resyncs == 2);

  feed.Unsubscribe(lock_id);
  CHECK(feed.subscribers() == 1);
  feed.Publish(Revision(9), {Event(mvccpb::Event::PUT, "lock/2")});
  CHECK(lock_seen.size() == 2);
}

TEST_CASE("recipe request builders follow clientv3's concurrency package", "[node][recipe]") {
  CHECK(recipe::PrefixEnd("lock/") == "lock0");
  CHECK(recipe::PrefixEnd(std::string("a\xff", 2)) == "b");
  CHECK(recipe::KeyFor("lock/", 0x694d7c7a8a5c1f0bLL) == "lock/694d7c7a8a5c1f0b");
  etcdserverpb::RangeRequest first = recipe::FirstCreate("e/");
  CHECK(first.key() == "e/");
  CHECK(first.range_end() == "e0");
  CHECK(first.sort_target() == etcdserverpb::RangeRequest::CREATE);
  CHECK(first.sort_order() == etcdserverpb::RangeRequest::ASCEND);
  CHECK(first.limit() == 1);
  const std::string prefix = "lock/";
  etcdserverpb::TxnRequest txn = recipe::CreateIfAbsent("lock/1", "", 1, &prefix);
  REQUIRE(txn.compare_size() == 1);
  CHECK(txn.compare(0).target() == etcdserverpb::Compare::CREATE);
  CHECK(txn.compare(0).create_revision() == 0);
  REQUIRE(txn.success_size() == 2);
  CHECK(txn.success(0).request_put().lease() == 1);
  CHECK(txn.success(1).request_range().limit() == 1);
  REQUIRE(txn.failure_size() == 2);
  CHECK(txn.failure(0).request_range().key() == "lock/1");
}

}  // namespace
}  // namespace epoch::server
