// WatchHub: the switch from history replay to live events (no gap, no duplicate) under every
// interleaving of applies, dispatch rounds and history reads; slow watchers falling back to
// history with bounded memory; inbox overflow and revision jumps; and a seeded randomized run
// checked against a model of the history (EPOCH_WATCH_SEED=<n> reruns one seed).
#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <random>
#include <thread>

#include "watch_test_util.h"

namespace epoch::server::watch_testing {
namespace {

std::vector<std::int64_t> Range(std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> out;
  for (std::int64_t r = from; r <= to; ++r) out.push_back(r);
  return out;
}

TEST_CASE("replay then live: applied-but-undispatched revisions are neither lost nor repeated",
          "[watch][hub]") {
  WatchHubOptions options;
  options.history_batch_events = 3;  // several history reads
  WatchFixture f(options);
  for (int i = 0; i < 10; ++i) f.Put("k", std::to_string(i));  // revs 2..11, dispatched
  f.RunDispatch();
  // Revisions 12..15 are applied to the store but the hub has not seen them yet.
  std::vector<ApplyResult> late;
  for (int i = 0; i < 4; ++i) late.push_back(f.Put("k", "late" + std::to_string(i), false));
  FakeStream s(f);
  s.Create(CreateReq("k", "", 5));
  REQUIRE(s.session().watcher_state(0) == WatcherState::kCatchingUp);

  SECTION("history first, then the late rounds") {
    f.RunReads();  // reads 5..15 (the store is ahead of the hub)
    CHECK(s.session().watcher_state(0) == WatcherState::kSynced);
    for (const ApplyResult& r : late) f.Publish(r);
    f.Put("k", "new");  // rev 16
  }
  SECTION("late rounds first (into the buffer), then history") {
    for (const ApplyResult& r : late) f.Publish(r);
    f.Put("k", "new");  // rev 16
    f.RunDispatch();
    CHECK(s.session().watcher_state(0) == WatcherState::kCatchingUp);
  }
  SECTION("rounds and history reads interleaved one by one") {
    for (const ApplyResult& r : late) {
      f.RunOneRead();
      f.Publish(r);
      f.RunDispatch();
    }
    f.RunOneRead();
    f.Put("k", "new");  // rev 16
  }
  Settle(f, {&s});
  CHECK(s.session().watcher_state(0) == WatcherState::kSynced);
  CHECK(RevisionsOf(EventsOf(s.received())) == Range(5, 16));
  CHECK(s.received()[0].created());
  CHECK(s.received()[0].header().revision() == 11);
}

// With nobody watching, an applied revision is marked dispatched at once: no copy of its events,
// no dispatch round. A watcher that arrives later reads those revisions from history and then
// gets live events; once it is gone, revisions skip the hub again.
TEST_CASE("revisions applied while nobody watches skip the dispatch and come from history",
          "[watch][hub]") {
  WatchFixture f;
  for (int i = 0; i < 5; ++i) f.Put("k", std::to_string(i));  // revs 2..6
  CHECK(f.hub().stats().unwatched == 5);
  CHECK(f.hub().dispatched_revision() == Revision(6));
  CHECK(f.RunDispatch() == 0);  // nothing was queued

  FakeStream s(f);
  s.Create(CreateReq("k", "", 2));
  f.Put("k", "live");  // rev 7: a watcher exists, so it goes through the inbox
  Settle(f, {&s});
  CHECK(f.hub().stats().unwatched == 5);
  CHECK(RevisionsOf(EventsOf(s.received())) == Range(2, 7));

  s.Cancel(0);
  Settle(f, {&s});
  f.Put("k", "after");  // rev 8
  CHECK(f.hub().stats().unwatched == 6);
  CHECK(f.hub().dispatched_revision() == Revision(8));
}

// Watchers that want none of a revision's keys make it skip the hub too; a revision one of them
// wants is carried live, and a later watcher still reads the skipped ones from history.
TEST_CASE("revisions no watcher wants skip the dispatch; wanted ones are carried live",
          "[watch][hub]") {
  WatchFixture f;
  FakeStream s(f);
  s.Create(CreateReq("a"));         // 0: one key
  s.Create(CreateReq("p/", "p0"));  // 1: a prefix (a range watcher)
  Settle(f, {&s});
  f.Put("z", "1");  // rev 2: nobody wants it
  CHECK(f.hub().stats().unwatched == 1);
  CHECK(f.hub().dispatched_revision() == Revision(2));
  CHECK(f.RunDispatch() == 0);  // nothing was queued
  f.Put("p/x", "2");            // rev 3: the prefix watcher's
  f.Put("a", "3");              // rev 4: the key watcher's
  f.Put("q", "4");              // rev 5: queued behind them, so not skipped
  Settle(f, {&s});
  CHECK(f.hub().stats().unwatched == 1);
  f.Put("q", "5");  // rev 6: skipped again
  CHECK(f.hub().stats().unwatched == 2);
  CHECK(RevisionsOf(EventsOf(s.received(), 0)) == std::vector<std::int64_t>{4});
  CHECK(RevisionsOf(EventsOf(s.received(), 1)) == std::vector<std::int64_t>{3});

  FakeStream later(f);
  const std::string nul(1, '\0');
  later.Create(CreateReq(nul, nul, 2));  // every key, from revision 2
  Settle(f, {&later});
  CHECK(RevisionsOf(EventsOf(later.received())) == Range(2, 6));
}

TEST_CASE("thousands of range watchers: an unwatched revision is still skipped", "[watch][hub]") {
  WatchHubOptions options;
  options.watchers_per_stream_max = 5000;
  WatchFixture f(options);
  FakeStream s(f);
  for (std::size_t i = 0; i < 2000; ++i) {  // 2000 distinct ranges
    s.Create(CreateReq(fmt::format("r{:04}/", i), fmt::format("r{:04}0", i)));
  }
  for (std::size_t i = 0; i < 2000; ++i) s.Create(CreateReq("p/", "p0"));  // one shared prefix
  pb::WatchCreateRequest no_put = CreateReq("x", "y");                     // puts filtered out
  no_put.add_filters(pb::WatchCreateRequest::NOPUT);
  s.Create(no_put);
  Settle(f, {&s});
  REQUIRE(f.hub().stats().watchers == 4001);
  f.Put("z", "1");   // rev 2: no range covers it
  f.Put("xa", "1");  // rev 3: covered, but its only watcher drops PUTs
  CHECK(f.hub().stats().unwatched == 2);
  CHECK(f.hub().dispatched_revision() == Revision(3));
  f.Put("p/a", "1");      // rev 4: 2000 watchers of one range
  f.Put("r0999/k", "1");  // rev 5: one watcher
  CHECK(f.hub().stats().unwatched == 2);
  Settle(f, {&s});
  CHECK(EventsOf(s.received()).size() == 2001);
  CHECK(f.hub().dispatched_revision() == Revision(5));
}

TEST_CASE("start_revision equal to the dispatched revision replays just that revision",
          "[watch][hub]") {
  WatchFixture f;
  f.Put("k", "a");  // 2
  f.Put("k", "b");  // 3
  f.RunDispatch();
  FakeStream s(f);
  s.Create(CreateReq("k", "", 3));
  f.Put("k", "c");  // 4
  Settle(f, {&s});
  CHECK(RevisionsOf(EventsOf(s.received())) == std::vector<std::int64_t>{3, 4});
}

TEST_CASE(
    "a stalled client: the watcher falls back to history, memory stays bounded, and it "
    "later receives every event exactly once",
    "[watch][hub]") {
  WatchHubOptions options;
  options.watcher_pending_bytes_max = 4096;
  options.history_batch_events = 16;
  WatchFixture f(options);
  FakeStream slow(f);
  FakeStream fast(f);
  slow.Create(CreateReq("k/", "k0"));
  fast.Create(CreateReq("k/", "k0"));
  Settle(f, {&slow, &fast});
  const std::string value(100, 'v');
  for (int i = 0; i < 400; ++i) {
    f.Put(fmt::format("k/{:03}", i), value);
    f.RunDispatch();
    f.RunReads();
    fast.AckAll();  // the fast client keeps up; the slow one never acknowledges its write
  }
  CHECK(slow.writing());
  CHECK(slow.session().watcher_state(0) == WatcherState::kCatchingUp);
  CHECK(fast.session().watcher_state(0) == WatcherState::kSynced);
  CHECK(f.hub().stats().fallbacks >= 1);
  // Bounded: what is queued fits the allowance plus one history batch (16 events ~ 2 KB) plus
  // one revision; 400 events of ~110 bytes would be ~44 KB.
  CHECK(slow.session().queued_responses() < 64);
  Settle(f, {&slow, &fast});
  CHECK(RevisionsOf(EventsOf(slow.received())) == Range(2, 401));
  CHECK(RevisionsOf(EventsOf(fast.received())) == Range(2, 401));
  CHECK(slow.session().watcher_state(0) == WatcherState::kSynced);
  CHECK(f.hub().stats().history_reads > 1);
}

TEST_CASE("a slow watcher whose position is compacted meanwhile gets the compacted cancel",
          "[watch][hub]") {
  WatchHubOptions options;
  options.watcher_pending_bytes_max = 1024;
  WatchFixture f(options);
  FakeStream slow(f);
  slow.Create(CreateReq("k"));
  Settle(f, {&slow});
  for (int i = 0; i < 50; ++i) {
    f.Put("k", std::string(100, 'a' + i % 26));
    f.RunDispatch();
  }
  REQUIRE(slow.session().watcher_state(0) == WatcherState::kCatchingUp);
  f.Compact(45);
  Settle(f, {&slow});
  const auto& r = slow.received();
  REQUIRE_FALSE(r.empty());
  CHECK(r.back().canceled());
  CHECK(r.back().compact_revision() == 45);
  CHECK(slow.session().watcher_state(0) == WatcherState::kCanceled);
  // What it did receive before the cancel is a gap-free prefix.
  std::vector<std::int64_t> got = RevisionsOf(EventsOf(r));
  CHECK(got == Range(2, 1 + static_cast<std::int64_t>(got.size())));
}

TEST_CASE("inbox overflow: the hub stops carrying events and watchers read them from history",
          "[watch][hub]") {
  WatchHubOptions options;
  options.inbox_bytes_max = 2000;
  WatchFixture f(options);
  FakeStream s(f);
  s.Create(CreateReq("k"));
  s.Create(CreateReq("j", "", 0));
  Settle(f, {&s});
  for (int i = 0; i < 100; ++i) f.Put(i % 2 ? "k" : "j", std::string(50, 'x'));  // no dispatch
  f.Put("k", "last");
  Settle(f, {&s});
  CHECK(f.hub().stats().gaps >= 1);
  std::vector<std::int64_t> k_revs, j_revs;
  for (std::int64_t r = 2; r <= 101; ++r) ((r - 2) % 2 ? k_revs : j_revs).push_back(r);
  k_revs.push_back(102);
  CHECK(RevisionsOf(EventsOf(s.received(), 0)) == k_revs);
  CHECK(RevisionsOf(EventsOf(s.received(), 1)) == j_revs);
}

TEST_CASE("a jump in published revisions (store replaced) is read from history", "[watch][hub]") {
  WatchFixture f;
  FakeStream s(f);
  s.Create(CreateReq("k"));
  Settle(f, {&s});
  f.Put("k", "1");         // 2, published
  f.Put("k", "2", false);  // 3, never published (as if installed by a snapshot)
  f.Put("k", "3", false);  // 4
  f.Put("k", "4");         // 5: the hub sees 3..4 missing
  Settle(f, {&s});
  CHECK(RevisionsOf(EventsOf(s.received())) == Range(2, 5));

  f.Put("k", "5", false);  // 6
  f.hub().Resync();        // what a snapshot install calls
  Settle(f, {&s});
  CHECK(RevisionsOf(EventsOf(s.received())) == Range(2, 6));
}

// Randomized: several streams create watchers (random key ranges, starts, filters) and cancel
// them while writes, dispatch rounds, history reads and client acks interleave at random, with
// small buffers so fallbacks happen. Each watcher must receive exactly the model's events.
TEST_CASE("randomized interleavings match the history model", "[watch][hub][model]") {
  const char* env = std::getenv("EPOCH_WATCH_SEED");
  const std::uint64_t first = env ? std::strtoull(env, nullptr, 10) : 1;
  const std::uint64_t count = env ? 1 : 40;
  std::uint64_t fallbacks = 0, gaps = 0, history_reads = 0;
  for (std::uint64_t seed = first; seed < first + count; ++seed) {
    INFO("seed " << seed << " (rerun: EPOCH_WATCH_SEED=" << seed << " node_tests \"[model]\")");
    std::mt19937_64 rng(seed);
    auto pick = [&rng](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
    WatchHubOptions options;
    options.watcher_pending_bytes_max = 600 + static_cast<std::size_t>(pick(2000));
    options.history_batch_events = 1 + static_cast<std::size_t>(pick(8));
    options.response_bytes_max = 200 + static_cast<std::size_t>(pick(800));
    options.inbox_bytes_max = pick(3) == 0 ? 150 : 1u << 20;
    WatchFixture f(options);
    std::vector<std::unique_ptr<FakeStream>> streams;
    for (int i = 0; i < 3; ++i) streams.push_back(std::make_unique<FakeStream>(f));

    struct Created {
      FakeStream* stream;
      std::int64_t id;
      WatchSpec spec;
      bool canceled = false;
    };
    std::vector<Created> created;
    std::vector<std::pair<std::int64_t, mvccpb::Event>> history;  // (revision, event)
    const std::vector<std::string> keys = {"a", "b", "b1", "c", "d"};
    std::int64_t revision = 1;

    // Learns assigned IDs from created replies as they arrive (in request order per stream).
    auto learn_ids = [&] {
      for (auto& s : streams) {
        std::size_t next = 0;
        for (const pb::WatchResponse& r : s->received()) {
          if (!r.created()) continue;
          while (next < created.size() && created[next].stream != s.get()) ++next;
          REQUIRE(next < created.size());
          created[next].id = r.watch_id();
          if (created[next].spec.start_revision == Revision(0)) {
            created[next].spec.start_revision = Revision(r.header().revision() + 1);
          }
          ++next;
        }
      }
    };

    for (int step = 0; step < 300; ++step) {
      const int action = pick(100);
      if (action < 35) {
        const std::string& key = keys[static_cast<std::size_t>(pick(5))];
        ApplyResult r = pick(4) == 0 ? f.Delete(key) : f.Put(key, std::to_string(step));
        if (r.revision.value() > revision) {
          revision = r.revision.value();
          for (const auto& e : r.events) history.emplace_back(revision, e);
        }
      } else if (action < 50) {
        f.RunDispatch();
      } else if (action < 62) {
        f.RunOneRead();
      } else if (action < 80) {
        FakeStream& s = *streams[static_cast<std::size_t>(pick(3))];
        for (int n = pick(4); n >= 0 && s.Ack();) --n;
      } else if (action < 92) {
        pb::WatchCreateRequest c;
        const int kind = pick(3);
        c.set_key(keys[static_cast<std::size_t>(pick(5))]);
        if (kind == 1) c.set_range_end(std::string(1, '\0'));
        if (kind == 2) c.set_range_end(c.key() + "\xff");
        c.set_start_revision(pick(3) == 0 ? 0 : 1 + pick(static_cast<int>(revision) + 2));
        if (pick(5) == 0) c.add_filters(pb::WatchCreateRequest::NODELETE);
        c.set_prev_kv(pick(2) == 0);
        FakeStream* s = streams[static_cast<std::size_t>(pick(3))].get();
        const std::size_t before = s->session().watcher_count();
        s->Create(c);
        REQUIRE(s->session().watcher_count() == before + 1);
        Result<WatchSpec> spec = ParseWatchCreate(c);
        REQUIRE(spec.ok());
        created.push_back({s, -1, *spec});
      } else if (!created.empty()) {
        Created& w = created[static_cast<std::size_t>(pick(static_cast<int>(created.size())))];
        if (w.id >= 0 && !w.canceled) {
          w.stream->Cancel(w.id);
          w.canceled = true;
        }
      }
      learn_ids();
    }
    std::vector<FakeStream*> all;
    for (auto& s : streams) all.push_back(s.get());
    Settle(f, all);
    learn_ids();
    fallbacks += f.hub().stats().fallbacks;
    gaps += f.hub().stats().gaps;
    history_reads += f.hub().stats().history_reads;

    for (const Created& w : created) {
      if (w.canceled) continue;
      INFO("watch " << w.id << " key " << w.spec.key << " start " << w.spec.start_revision);
      std::vector<SeenEvent> want;
      for (const auto& [rev, e] : history) {
        if (rev < w.spec.start_revision.value() || !w.spec.Wants(e)) continue;
        want.push_back(
            {w.id, rev, e.type(), e.kv().key(), e.kv().value(), w.spec.prev_kv && e.has_prev_kv()});
      }
      CHECK(EventsOf(w.stream->received(), w.id) == want);
    }
  }
  // The runs went through every path: slow-watcher fallbacks, inbox gaps, history reads.
  if (count > 1) {
    CHECK(fallbacks > 0);
    CHECK(gaps > 0);
    CHECK(history_reads > 0);
  }
}

}  // namespace
}  // namespace epoch::server::watch_testing

namespace epoch::server::watch_testing {
namespace {

// A stream whose client runs on its own thread: each write is acknowledged from there.
class ThreadedStream {
 public:
  explicit ThreadedStream(const std::shared_ptr<WatchHub>& hub) {
    session_ = WatchSession::Create(
        hub, WatchSession::Transport{[this](const pb::WatchResponse& r, bool) {
                                       std::lock_guard lock(mu_);
                                       // Unparsable: an empty response; its events are missing.
                                       pending_ = OverTheWire(r).value_or(pb::WatchResponse{});
                                       cv_.notify_all();
                                     },
                                     {},
                                     {}});
    client_ = std::thread([this] { Run(); });
  }
  ~ThreadedStream() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
      cv_.notify_all();
    }
    client_.join();
    session_->Close();
  }
  WatchSession& session() { return *session_; }

  // Waits until `done(received)` holds; false after `timeout`.
  template <typename Pred>
  bool WaitFor(Pred done, std::chrono::seconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return done(received_); });
  }
  std::vector<pb::WatchResponse> received() {
    std::lock_guard lock(mu_);
    return received_;
  }

 private:
  void Run() {
    std::unique_lock lock(mu_);
    while (true) {
      cv_.wait(lock, [this] { return stop_ || pending_.has_value(); });
      if (stop_) return;
      received_.push_back(std::move(*pending_));
      pending_.reset();
      cv_.notify_all();
      lock.unlock();
      session_->OnWriteDone(true);  // may start the next write (on this thread)
      lock.lock();
    }
  }

  std::shared_ptr<WatchSession> session_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<pb::WatchResponse> pending_;  // guarded by mu_
  std::vector<pb::WatchResponse> received_;   // guarded by mu_
  bool stop_ = false;                         // guarded by mu_
  std::thread client_;
};

TEST_CASE("threads: applier, dispatch, history reads and clients concurrently",
          "[watch][hub][threads]") {
  test_support::TempDir dir("epoch-watch");
  Result<std::unique_ptr<KvStore>> opened = KvStore::Open(dir.Sub("kv"), KvStoreOptions{});
  REQUIRE(opened.ok());
  std::unique_ptr<KvStore> store = std::move(*opened);
  asio::thread_pool dispatch_pool(1);
  asio::thread_pool read_pool(2);
  WatchHubOptions options;
  options.watcher_pending_bytes_max = 2048;  // clients fall behind now and then
  options.history_batch_events = 8;
  std::shared_ptr<WatchHub> hub =
      WatchHub::Create(*store, dispatch_pool.get_executor(), read_pool.get_executor(), options);

  constexpr int kWrites = 1500;
  const std::vector<std::string> keys = {"a", "b", "c"};
  std::vector<std::pair<std::int64_t, mvccpb::Event>> history;  // written by the applier only
  std::atomic<std::int64_t> applied_revision{1};
  std::thread applier([&] {
    for (int i = 0; i < kWrites; ++i) {
      v1::InternalRequest request;
      request.mutable_put()->set_key(keys[static_cast<std::size_t>(i % 3)]);
      request.mutable_put()->set_value(std::string(40, static_cast<char>('a' + i % 26)));
      Result<ApplyResult> r = store->Apply(LogIndex(static_cast<std::uint64_t>(i + 1)), request);
      if (!r.ok()) return;
      for (const auto& e : r->events) history.emplace_back(r->revision.value(), e);
      hub->Publish(r->revision, r->events);
      applied_revision = r->revision.value();
    }
  });

  // Streams and watchers created while the applier runs, with starts in the past and now.
  std::vector<std::unique_ptr<ThreadedStream>> streams;
  struct Made {
    ThreadedStream* stream;
    std::int64_t id;
    std::string key;
    std::int64_t start;  // 0: from the created reply
  };
  std::vector<Made> made;
  std::mt19937_64 rng(7);
  for (int s = 0; s < 4; ++s) {
    streams.push_back(std::make_unique<ThreadedStream>(hub));
    for (int k = 0; k < 3; ++k) {
      const std::int64_t now = applied_revision.load();
      const std::int64_t start =
          rng() % 3 == 0 ? 0
                         : 1 + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(now));
      pb::WatchRequest request;
      request.mutable_create_request()->set_key(keys[static_cast<std::size_t>(k)]);
      request.mutable_create_request()->set_start_revision(start);
      (void)streams.back()->session().Handle(request);
      made.push_back({streams.back().get(), k, keys[static_cast<std::size_t>(k)], start});
    }
  }
  applier.join();
  REQUIRE(applied_revision.load() == kWrites + 1);

  for (const Made& m : made) {
    INFO("watch " << m.id << " on " << m.key << " from " << m.start);
    // The created reply gives the real start of a start-0 watcher.
    REQUIRE(m.stream->WaitFor(
        [&](const std::vector<pb::WatchResponse>& rs) {
          return std::any_of(rs.begin(), rs.end(), [&](const pb::WatchResponse& r) {
            return r.created() && r.watch_id() == m.id;
          });
        },
        std::chrono::seconds(30)));
    std::vector<pb::WatchResponse> rs = m.stream->received();
    std::int64_t start = m.start;
    for (const auto& r : rs) {
      if (r.created() && r.watch_id() == m.id && start == 0) start = r.header().revision() + 1;
    }
    std::vector<std::int64_t> want;
    for (const auto& [rev, e] : history) {
      if (rev >= start && e.kv().key() == m.key) want.push_back(rev);
    }
    bool complete = m.stream->WaitFor(
        [&](const std::vector<pb::WatchResponse>& got) {
          return RevisionsOf(EventsOf(got, m.id)).size() >= want.size();
        },
        std::chrono::seconds(60));
    CHECK(complete);
    CHECK(RevisionsOf(EventsOf(m.stream->received(), m.id)) == want);
  }
  // Quiesce the hub's threads before the streams (their write callbacks) go away.
  hub->Detach();
  dispatch_pool.join();
  read_pool.join();
  streams.clear();
}

}  // namespace
}  // namespace epoch::server::watch_testing
