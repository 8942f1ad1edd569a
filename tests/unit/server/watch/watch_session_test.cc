// The watch stream protocol as clients depend on it (docs/etcd-compatibility.md §3.5): watch IDs,
// created replies first and in request order, key/prefix/range/from-key matching, filters,
// prev_kv, cancel, compacted and invalid starts, revisions never split across responses
// (fragments only on request), RequestProgress and progress_notify.
#include <catch2/catch.hpp>
#include <map>

#include "epoch/etcd_errors.h"
#include "watch_test_util.h"

namespace epoch::server::watch_testing {
namespace {

TEST_CASE("watch IDs: auto-assigned from 0 per stream, explicit IDs kept, duplicates refused",
          "[watch]") {
  WatchFixture f;
  FakeStream s(f);
  FakeStream other(f);
  pb::WatchCreateRequest explicit_one = CreateReq("a");
  explicit_one.set_watch_id(1);
  s.Create(CreateReq("a"));      // auto: 0
  s.Create(explicit_one);        // 1
  s.Create(CreateReq("b"));      // auto: 2 (1 is taken)
  s.Create(explicit_one);        // duplicate
  other.Create(CreateReq("c"));  // another stream starts at 0 again
  Settle(f, {&s, &other});

  const auto& r = s.received();
  REQUIRE(r.size() == 4);
  CHECK((r[0].created() && !r[0].canceled() && r[0].watch_id() == 0));
  CHECK((r[1].created() && !r[1].canceled() && r[1].watch_id() == 1));
  CHECK((r[2].created() && !r[2].canceled() && r[2].watch_id() == 2));
  CHECK((r[3].created() && r[3].canceled() && r[3].watch_id() == -1));
  CHECK(r[3].cancel_reason() == kWatcherDuplicateId);
  CHECK(r[0].header().cluster_id() == 7);
  CHECK(r[0].header().member_id() == 9);
  REQUIRE(other.received().size() == 1);
  CHECK(other.received()[0].watch_id() == 0);
  CHECK(s.session().watcher_count() == 3);
}

TEST_CASE("invalid creates get a created+canceled reply in order with etcd's reason", "[watch]") {
  WatchFixture f;
  FakeStream s(f);
  s.Create(CreateReq("a", "", -5));  // negative start
  s.Create(CreateReq("b", "a"));     // inverted range
  s.Create(CreateReq("b", "b"));     // empty range
  s.Create(CreateReq("z"));          // fine: gets ID 0
  Settle(f, {&s});
  const auto& r = s.received();
  REQUIRE(r.size() == 4);
  CHECK(r[0].cancel_reason() == etcd_errors::kCompacted.message);
  CHECK(r[1].cancel_reason() == kWatcherRangeEmpty);
  CHECK(r[2].cancel_reason() == kWatcherRangeEmpty);
  for (int i = 0; i < 3; ++i) {
    CHECK((r[i].created() && r[i].canceled() && r[i].watch_id() == -1));
  }
  CHECK((r[3].created() && !r[3].canceled() && r[3].watch_id() == 0));
}

TEST_CASE("start_revision 0: events after the created reply's header.revision, created first",
          "[watch]") {
  WatchFixture f;
  f.Put("k", "before");
  f.RunDispatch();
  FakeStream s(f);
  s.Create(CreateReq("k"));
  f.Put("k", "after");
  Settle(f, {&s});
  const auto& r = s.received();
  REQUIRE(r.size() == 2);
  CHECK(r[0].created());
  CHECK(r[0].header().revision() == 2);
  CHECK(r[1].events_size() == 1);
  CHECK(r[1].events(0).kv().value() == "after");
  CHECK(r[1].events(0).kv().mod_revision() == 3);
  CHECK(r[1].events(0).kv().create_revision() == 2);
  CHECK(r[1].events(0).kv().version() == 2);
  CHECK(r[1].header().revision() == 3);
}

TEST_CASE("create replies stay in request order when an earlier watcher replays history",
          "[watch]") {
  WatchFixture f;
  for (int i = 0; i < 5; ++i) f.Put("k", std::to_string(i));
  f.RunDispatch();
  FakeStream s(f);
  s.Create(CreateReq("k", "", 2));  // history
  s.Create(CreateReq("k"));         // live
  f.Put("k", "live");
  Settle(f, {&s});
  const auto& r = s.received();
  REQUIRE(r.size() >= 3);
  CHECK((r[0].created() && r[0].watch_id() == 0));
  CHECK((r[1].created() && r[1].watch_id() == 1));
  CHECK(RevisionsOf(EventsOf(r, 0)) == std::vector<std::int64_t>{2, 3, 4, 5, 6, 7});
  CHECK(RevisionsOf(EventsOf(r, 1)) == std::vector<std::int64_t>{7});
}

TEST_CASE("key, prefix, range, from-key and whole-keyspace watchers see exactly their keys",
          "[watch]") {
  WatchFixture f;
  FakeStream s(f);
  s.Create(CreateReq("foo"));                         // 0: single key
  s.Create(CreateReq("foo", "fop"));                  // 1: prefix "foo"
  s.Create(CreateReq("b", "d"));                      // 2: range [b, d)
  s.Create(CreateReq("foo1", std::string(1, '\0')));  // 3: from-key >= foo1
  s.Create(CreateReq("", std::string(1, '\0')));      // 4: everything
  for (const char* k : {"a", "b", "c", "d", "foo", "foo1", "foo\xff", "fop", "z"}) f.Put(k, "v");
  Settle(f, {&s});
  auto keys = [&](std::int64_t id) {
    std::vector<std::string> out;
    for (const SeenEvent& e : EventsOf(s.received(), id)) out.push_back(e.key);
    return out;
  };
  using V = std::vector<std::string>;
  CHECK(keys(0) == V{"foo"});
  CHECK(keys(1) == V{"foo", "foo1", "foo\xff"});
  CHECK(keys(2) == V{"b", "c"});
  CHECK(keys(3) == V{"foo1", "foo\xff", "fop", "z"});
  CHECK(keys(4) == V{"a", "b", "c", "d", "foo", "foo1", "foo\xff", "fop", "z"});
}

TEST_CASE("NOPUT and NODELETE filters; DELETE events carry the deletion revision", "[watch]") {
  WatchFixture f;
  FakeStream s(f);
  pb::WatchCreateRequest no_put = CreateReq("k");
  no_put.add_filters(pb::WatchCreateRequest::NOPUT);
  pb::WatchCreateRequest no_delete = CreateReq("k");
  no_delete.add_filters(pb::WatchCreateRequest::NODELETE);
  s.Create(no_put);     // 0
  s.Create(no_delete);  // 1
  f.Put("k", "v1");     // rev 2
  f.Delete("k");        // rev 3
  f.Put("k", "v2");     // rev 4
  Settle(f, {&s});
  std::vector<SeenEvent> deletes = EventsOf(s.received(), 0);
  REQUIRE(deletes.size() == 1);
  CHECK(deletes[0].type == mvccpb::Event::DELETE);
  CHECK(deletes[0].revision == 3);
  std::vector<SeenEvent> puts = EventsOf(s.received(), 1);
  REQUIRE(puts.size() == 2);
  CHECK((puts[0].type == mvccpb::Event::PUT && puts[0].revision == 2));
  CHECK((puts[1].type == mvccpb::Event::PUT && puts[1].revision == 4));
}

TEST_CASE("prev_kv only when asked, live and from history", "[watch]") {
  WatchFixture f;
  f.Put("k", "v1");  // rev 2
  f.RunDispatch();
  FakeStream s(f);
  pb::WatchCreateRequest with = CreateReq("k");
  with.set_prev_kv(true);
  pb::WatchCreateRequest history_with = CreateReq("k", "", 2);
  history_with.set_prev_kv(true);
  s.Create(with);                   // 0
  s.Create(CreateReq("k"));         // 1
  s.Create(history_with);           // 2
  s.Create(CreateReq("k", "", 2));  // 3
  f.Put("k", "v2");                 // rev 3
  Settle(f, {&s});
  for (std::int64_t id : {0, 2}) {
    INFO("watch " << id);
    for (const pb::WatchResponse& r : s.received()) {
      if (r.watch_id() != id) continue;
      for (const mvccpb::Event& e : r.events()) {
        if (e.kv().mod_revision() == 3) {
          REQUIRE(e.has_prev_kv());
          CHECK(e.prev_kv().value() == "v1");
        }
      }
    }
  }
  for (const SeenEvent& e : EventsOf(s.received(), 1)) CHECK_FALSE(e.has_prev_kv);
  for (const SeenEvent& e : EventsOf(s.received(), 3)) CHECK_FALSE(e.has_prev_kv);
  CHECK(RevisionsOf(EventsOf(s.received(), 2)) == std::vector<std::int64_t>{2, 3});
}

TEST_CASE("prev_kv with lazy previous values: from the store, or from history when left out",
          "[watch]") {
  KvStoreOptions lazy;
  lazy.lazy_prev_values = true;  // as epochd runs: events carry them only while asked for
  WatchFixture f({}, lazy);
  f.Put("k", "v1");  // rev 2
  f.RunDispatch();
  // Applied while nobody wanted previous values, published after the watcher below registered:
  // its event has no prev_kv, so the watcher must read revision 3 from history.
  ApplyResult late = f.Put("k", "v2", /*publish=*/false);  // rev 3
  REQUIRE(late.events.size() == 1);
  REQUIRE_FALSE(late.events[0].has_prev_kv());
  FakeStream s(f);
  pb::WatchCreateRequest with = CreateReq("k");
  with.set_prev_kv(true);
  s.Create(with);  // 0
  f.RunDispatch();
  f.Publish(late);
  f.Put("k", "v3");  // rev 4: applied with the watcher counted, so its event carries prev_kv
  Settle(f, {&s});
  std::map<std::int64_t, std::string> prev_by_rev;
  for (const pb::WatchResponse& r : s.received()) {
    for (const mvccpb::Event& e : r.events()) {
      CHECK(e.has_prev_kv());
      prev_by_rev[e.kv().mod_revision()] = e.prev_kv().value();
    }
  }
  CHECK(prev_by_rev == std::map<std::int64_t, std::string>{{3, "v1"}, {4, "v2"}});
  s.Cancel(0);
  Settle(f, {&s});
  ApplyResult after = f.Put("k", "v4");  // nobody asks any more: left out again
  REQUIRE(after.events.size() == 1);
  CHECK_FALSE(after.events[0].has_prev_kv());
}

TEST_CASE("cancel: a canceled reply, then nothing more for that watcher; unknown IDs ignored",
          "[watch]") {
  WatchFixture f;
  FakeStream s(f);
  s.Create(CreateReq("k"));
  s.Create(CreateReq("k"));
  f.Put("k", "1");
  Settle(f, {&s});
  s.Cancel(0);
  s.Cancel(42);
  f.Put("k", "2");
  Settle(f, {&s});
  std::vector<pb::WatchResponse> r = s.received();
  auto canceled = std::find_if(r.begin(), r.end(), [](const pb::WatchResponse& x) {
    return x.canceled() && x.watch_id() == 0;
  });
  REQUIRE(canceled != r.end());
  CHECK_FALSE(canceled->created());
  CHECK(std::count_if(r.begin(), r.end(), [](const auto& x) { return x.canceled(); }) == 1);
  for (auto it = canceled + 1; it != r.end(); ++it) CHECK(it->watch_id() != 0);
  CHECK(RevisionsOf(EventsOf(r, 0)) == std::vector<std::int64_t>{2});
  CHECK(RevisionsOf(EventsOf(r, 1)) == std::vector<std::int64_t>{2, 3});
  CHECK(s.session().watcher_count() == 1);
  CHECK(f.hub().stats().watchers == 1);
}

TEST_CASE("a compacted start revision: created, then canceled with compact_revision", "[watch]") {
  WatchFixture f;
  for (int i = 0; i < 6; ++i) f.Put("k", std::to_string(i));  // revs 2..7
  f.Compact(5);
  f.RunDispatch();
  FakeStream s(f);
  s.Create(CreateReq("k", "", 3));  // below the compact revision
  s.Create(CreateReq("k", "", 5));  // at it: still served
  Settle(f, {&s});
  const auto& r = s.received();
  REQUIRE(r.size() >= 3);
  CHECK((r[0].created() && r[0].watch_id() == 0 && !r[0].canceled()));
  auto compacted = std::find_if(r.begin(), r.end(), [](const pb::WatchResponse& x) {
    return x.watch_id() == 0 && x.canceled();
  });
  REQUIRE(compacted != r.end());
  CHECK(compacted->compact_revision() == 5);
  CHECK(compacted->events_size() == 0);
  CHECK(EventsOf(r, 0).empty());
  CHECK(RevisionsOf(EventsOf(r, 1)) == std::vector<std::int64_t>{5, 6, 7});
  CHECK(s.session().watcher_state(0) == WatcherState::kCanceled);
  CHECK(s.session().watcher_state(1) == WatcherState::kSynced);
}

TEST_CASE("events of one revision are never split across responses", "[watch]") {
  WatchHubOptions options;
  options.response_bytes_max = 300;  // a few events per response
  WatchFixture f(options);
  FakeStream s(f);
  s.Create(CreateReq("t/", "t0"));
  const std::string value(60, 'x');
  for (int rev = 0; rev < 20; ++rev) {
    std::vector<std::pair<std::string, std::string>> kvs;
    for (int k = 0; k < 1 + rev % 4; ++k) kvs.emplace_back(fmt::format("t/{}/{}", rev, k), value);
    f.PutAll(kvs);
  }
  // Replay the same history too: a second watcher from revision 1.
  s.Create(CreateReq("t/", "t0", 1));
  Settle(f, {&s});
  for (std::int64_t id : {0, 1}) {
    INFO("watch " << id);
    std::map<std::int64_t, int> responses_per_revision;
    std::int64_t last = 0;
    for (const pb::WatchResponse& r : s.received()) {
      if (r.watch_id() != id || r.events_size() == 0) continue;
      CHECK_FALSE(r.fragment());
      std::set<std::int64_t> revisions;
      for (const auto& e : r.events()) {
        CHECK(e.kv().mod_revision() >= last);  // ordered
        last = e.kv().mod_revision();
        revisions.insert(last);
      }
      for (std::int64_t rev : revisions) ++responses_per_revision[rev];
    }
    CHECK(responses_per_revision.size() == 20);
    for (const auto& [rev, n] : responses_per_revision) CHECK(n == 1);
    CHECK(EventsOf(s.received(), id).size() == 50);
  }
}

TEST_CASE("many watchers on one stream: queued responses go out in bursts, complete and in order",
          "[watch]") {
  WatchFixture f;
  FakeStream s(f);
  constexpr int kKeys = 40;
  // Watchers 0..39 on one key each, 40..79 on the whole prefix.
  for (int i = 0; i < kKeys; ++i) s.Create(CreateReq(fmt::format("b/{:02}", i)));
  for (int i = 0; i < kKeys; ++i) s.Create(CreateReq("b/", "b0"));
  Settle(f, {&s});
  s.Take();
  std::vector<std::int64_t> revisions_of_key[kKeys];
  std::vector<std::int64_t> all_revisions;
  // The client acknowledges a few writes per round while rounds keep queuing more: whenever the
  // stream goes idle, nothing may be left in the transport's buffer.
  for (int round = 0; round < 20; ++round) {
    for (int j = 0; j < 10; ++j) {
      const int key = (round * 7 + j * 3) % kKeys;
      const std::int64_t rev = f.Put(fmt::format("b/{:02}", key), "v").revision.value();
      revisions_of_key[key].push_back(rev);
      all_revisions.push_back(rev);
    }
    f.RunDispatch();
    for (int k = 0; k < 3 && s.Ack(); ++k) {
      if (!s.writing()) CHECK(s.unflushed() == 0);
    }
  }
  while (s.Ack()) {
    if (!s.writing()) CHECK(s.unflushed() == 0);
  }
  CHECK(s.unflushed() == 0);
  CHECK(s.session().queued_responses() == 0);
  // Bursts were written with the hint: the queue was deeper than one response.
  CHECK(s.hinted_writes() > 0);
  for (int i = 0; i < kKeys; ++i) {
    INFO("key watcher " << i);
    CHECK(RevisionsOf(EventsOf(s.received(), i)) == revisions_of_key[i]);
  }
  for (int i = kKeys; i < 2 * kKeys; ++i) {
    INFO("prefix watcher " << i);
    CHECK(RevisionsOf(EventsOf(s.received(), i)) == all_revisions);
  }
}

TEST_CASE("a revision larger than a response is fragmented only for watchers that asked",
          "[watch]") {
  WatchHubOptions options;
  options.response_bytes_max = 500;
  WatchFixture f(options);
  FakeStream s(f);
  pb::WatchCreateRequest fragmented = CreateReq("big/", "big0");
  fragmented.set_fragment(true);
  s.Create(fragmented);                 // 0
  s.Create(CreateReq("big/", "big0"));  // 1
  std::vector<std::pair<std::string, std::string>> kvs;
  for (int k = 0; k < 30; ++k) kvs.emplace_back(fmt::format("big/{:02}", k), std::string(100, 'v'));
  f.PutAll(kvs);
  Settle(f, {&s});
  std::vector<pb::WatchResponse> parts;
  for (const auto& r : s.received()) {
    if (r.watch_id() == 0 && r.events_size() > 0) parts.push_back(r);
  }
  REQUIRE(parts.size() > 1);
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) CHECK(parts[i].fragment());
  CHECK_FALSE(parts.back().fragment());
  CHECK(EventsOf(parts).size() == 30);
  int whole = 0;
  for (const auto& r : s.received()) {
    if (r.watch_id() == 1 && r.events_size() > 0) {
      ++whole;
      CHECK(r.events_size() == 30);
      CHECK_FALSE(r.fragment());
    }
  }
  CHECK(whole == 1);
}

TEST_CASE("RequestProgress: watch_id -1 at the dispatched revision once every watcher is synced",
          "[watch]") {
  WatchFixture f;
  for (int i = 0; i < 10; ++i) f.Put("k", std::to_string(i));  // revs 2..11
  f.RunDispatch();
  FakeStream s(f);

  SECTION("all synced: answered at once") {
    s.Create(CreateReq("k"));
    s.RequestProgress();
    Settle(f, {&s});
    const auto& r = s.received();
    REQUIRE(r.size() == 2);
    CHECK(r[1].watch_id() == -1);
    CHECK(r[1].header().revision() == 11);
    CHECK(r[1].events_size() == 0);
    CHECK_FALSE(r[1].created());
  }
  SECTION("a watcher replaying history: answered after its replay, never before its events") {
    s.Create(CreateReq("k", "", 2));
    s.RequestProgress();
    f.Put("k", "more");  // rev 12, dispatched while the replay has not run
    f.RunDispatch();
    CHECK(s.session().watcher_state(0) == WatcherState::kCatchingUp);
    s.AckAll();
    REQUIRE(s.received().size() == 1);  // only the created reply
    Settle(f, {&s});
    const auto& r = s.received();
    auto progress = std::find_if(r.begin(), r.end(),
                                 [](const pb::WatchResponse& x) { return x.watch_id() == -1; });
    REQUIRE(progress != r.end());
    CHECK(progress->header().revision() == 12);
    std::int64_t last_event = 0;
    for (auto it = r.begin(); it != progress; ++it) {
      for (const auto& e : it->events()) last_event = e.kv().mod_revision();
    }
    CHECK(last_event == 12);
    CHECK(RevisionsOf(EventsOf(r, 0)).size() == 11);
  }
}

TEST_CASE("progress_notify: idle synced watchers that asked get a progress response per tick",
          "[watch]") {
  WatchFixture f;
  FakeStream s(f);
  pb::WatchCreateRequest notify = CreateReq("a");
  notify.set_progress_notify(true);
  s.Create(notify);  // 0: asked, idle
  pb::WatchCreateRequest busy = CreateReq("b");
  busy.set_progress_notify(true);
  s.Create(busy);            // 1: asked, gets events
  s.Create(CreateReq("a"));  // 2: did not ask
  Settle(f, {&s});
  s.Take();
  f.Put("b", "1");  // rev 2
  Settle(f, {&s});
  f.hub().TickProgress();
  Settle(f, {&s});
  std::vector<pb::WatchResponse> r = s.Take();
  auto progress_for = [](const std::vector<pb::WatchResponse>& rs, std::int64_t id) {
    return std::count_if(rs.begin(), rs.end(), [id](const pb::WatchResponse& x) {
      return x.watch_id() == id && x.events_size() == 0 && !x.created() && !x.canceled();
    });
  };
  CHECK(progress_for(r, 0) == 1);
  CHECK(progress_for(r, 1) == 0);  // it was sent an event since the last tick
  CHECK(progress_for(r, 2) == 0);
  for (const auto& x : r) {
    if (x.events_size() == 0) CHECK(x.header().revision() == 2);
  }
  // Next tick: both idle now.
  f.hub().TickProgress();
  Settle(f, {&s});
  r = s.Take();
  CHECK(progress_for(r, 0) == 1);
  CHECK(progress_for(r, 1) == 1);
  CHECK(progress_for(r, 2) == 0);
}

TEST_CASE("a future start revision: synced, events from that revision on", "[watch]") {
  WatchFixture f;
  FakeStream s(f);
  s.Create(CreateReq("k", "", 5));
  for (int i = 0; i < 6; ++i) f.Put("k", std::to_string(i));  // revs 2..7
  s.RequestProgress();  // deferred: the watcher starts in the future
  f.RunDispatch();
  Settle(f, {&s});
  CHECK(RevisionsOf(EventsOf(s.received())) == std::vector<std::int64_t>{5, 6, 7});
  auto progress = std::find_if(s.received().begin(), s.received().end(),
                               [](const pb::WatchResponse& x) { return x.watch_id() == -1; });
  REQUIRE(progress != s.received().end());
  CHECK(progress->header().revision() >= 4);
}

TEST_CASE("Close cancels every watcher and stops writing", "[watch]") {
  WatchFixture f;
  FakeStream s(f);
  s.Create(CreateReq("k"));
  s.Create(CreateReq("a", "z"));
  Settle(f, {&s});
  CHECK(f.hub().stats().watchers == 2);
  s.session().Close();
  f.Put("k", "1");
  Settle(f, {&s});
  CHECK(f.hub().stats().watchers == 0);
  CHECK(EventsOf(s.received()).empty());
  CHECK(s.session().queued_responses() == 0);
}

}  // namespace
}  // namespace epoch::server::watch_testing
