// A watch stream's own limits (WatchHubOptions): watchers per stream, and replies a client
// leaves unread.
#include <catch2/catch.hpp>

#include "watch_test_util.h"

namespace epoch::server::watch_testing {
namespace {

TEST_CASE("a stream holds at most watchers_per_stream_max watchers", "[watch][limits]") {
  WatchHubOptions options;
  options.watchers_per_stream_max = 3;
  WatchFixture f(options);
  FakeStream s(f);
  for (int i = 0; i < 4; ++i) s.Create(CreateReq("k" + std::to_string(i)));
  Settle(f, {&s});
  const auto& r = s.received();
  REQUIRE(r.size() == 4);
  CHECK((r[2].created() && !r[2].canceled()));
  CHECK((r[3].created() && r[3].canceled() && r[3].watch_id() == -1));
  CHECK(r[3].cancel_reason() == kWatchersPerStreamExceeded);
  CHECK(s.session().watcher_count() == 3);
  CHECK(f.hub().stats().watchers_refused == 1);
  // A cancel frees a place.
  s.Cancel(0);
  s.Create(CreateReq("again"));
  Settle(f, {&s});
  CHECK(s.session().watcher_count() == 3);
  CHECK(f.hub().stats().watchers_refused == 1);
}

TEST_CASE("a stream whose replies are not read is ended past control_queue_max",
          "[watch][limits]") {
  WatchHubOptions options;
  options.control_queue_max = 5;
  WatchFixture f(options);
  FakeStream s(f);
  pb::WatchRequest progress;
  progress.mutable_progress_request();
  // Nothing is acknowledged: the first reply stays in flight, the rest queue.
  pb::WatchRequest create;
  *create.mutable_create_request() = CreateReq("a");
  int kept = 0;
  while (kept < 100 && s.Send(create)) ++kept;
  CHECK(kept == 6);  // one in flight, five queued; the seventh create overflows
  CHECK(f.hub().stats().streams_cut == 1);

  // A client that reads is never cut, however many requests it sends.
  FakeStream reader(f);
  for (int i = 0; i < 50; ++i) {
    REQUIRE(reader.Send(progress));
    Settle(f, {&reader});
  }
  CHECK(f.hub().stats().streams_cut == 1);
}

}  // namespace
}  // namespace epoch::server::watch_testing
