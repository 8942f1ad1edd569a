// Checkpoints taken off the applier thread (KvStore::CreateCheckpoint, CheckpointCache): while
// another thread keeps applying, each image is exactly the state of the applied index it reports.
#include <fmt/format.h>

#include <atomic>
#include <thread>

#include "epoch/snapshot/snapshot_checkpoints.h"
#include "snapshot_test_util.h"

namespace epoch::server {
namespace {

using namespace snapshot_testing;

TEST_CASE("checkpoints taken while the applier goes on hold exactly their applied index",
          "[snapshot]") {
  TempDir tmp;
  auto store = OpenStore(tmp.Sub("kv"));
  // Every entry i puts k = i and a key of its own: an image at applied index A holds k = A,
  // revision A + 1 and exactly the keys own/1..own/A.
  constexpr std::uint64_t kEntries = 4000;
  std::atomic<bool> applier_done{false};
  std::thread applier([&] {
    for (std::uint64_t i = 1; i <= kEntries; ++i) {
      v1::InternalRequest request;
      request.mutable_txn()->add_success()->mutable_request_put()->set_key("k");
      request.mutable_txn()->mutable_success(0)->mutable_request_put()->set_value(
          std::to_string(i));
      request.mutable_txn()->add_success()->mutable_request_put()->set_key(
          fmt::format("own/{:05}", i));
      auto result = store->Apply(LogIndex(i), request);
      if (!result.ok() || !result->status.ok()) break;
    }
    applier_done = true;
  });

  std::filesystem::create_directories(tmp.Sub("snap"));
  CheckpointCache cache(tmp.Sub("snap"), *store);
  std::vector<std::shared_ptr<const Checkpoint>> taken;
  for (int n = 0; n < 8 && !applier_done.load(); ++n) {
    auto checkpoint = cache.Create();
    if (!checkpoint.ok()) {
      FAIL_CHECK(checkpoint.status().ToString());
      break;
    }
    taken.push_back(std::move(*checkpoint));
  }
  applier.join();
  REQUIRE(store->AppliedIndex() == LogIndex(kEntries));
  REQUIRE(!taken.empty());

  for (std::size_t n = 0; n < taken.size(); ++n) {
    const Checkpoint& checkpoint = *taken[n];
    INFO("checkpoint " << n << " at applied " << checkpoint.applied.value());
    if (n > 0) CHECK(checkpoint.applied >= taken[n - 1]->applied);
    auto image = KvStore::OpenFromCheckpoint(checkpoint.dir, tmp.Sub(fmt::format("img{}", n)), {});
    REQUIRE(image.ok());
    KvStore& s = **image;
    CHECK(s.AppliedIndex() == checkpoint.applied);
    CHECK(s.CurrentRevision() == checkpoint.revision);
    const std::uint64_t applied = checkpoint.applied.value();
    if (applied == 0) continue;
    CHECK(checkpoint.revision == Revision(static_cast<std::int64_t>(applied) + 1));
    CHECK(Get(s, "k") == std::to_string(applied));
    etcdserverpb::RangeRequest own;
    own.set_key("own/");
    own.set_range_end("own0");
    own.set_count_only(true);
    auto counted = s.Range(own);
    REQUIRE(counted.ok());
    CHECK(counted->count() == static_cast<std::int64_t>(applied));
  }
}

TEST_CASE("checkpoint cache: a checkpoint in use is shared when it is recent enough",
          "[snapshot]") {
  TempDir tmp;
  auto store = OpenStore(tmp.Sub("kv"));
  Put(*store, 1, "a", "1");
  std::filesystem::create_directories(tmp.Sub("snap"));
  CheckpointCache cache(tmp.Sub("snap"), *store);
  auto first = cache.Acquire(LogIndex(1));
  REQUIRE(first.ok());
  CHECK((*first)->applied == LogIndex(1));
  auto again = cache.Acquire(LogIndex(1));
  REQUIRE(again.ok());
  CHECK(again->get() == first->get());
  CHECK(cache.created() == 1);
  Put(*store, 2, "a", "2");
  auto newer = cache.Acquire(LogIndex(2));
  REQUIRE(newer.ok());
  CHECK(newer->get() != first->get());
  CHECK((*newer)->applied == LogIndex(2));
  const std::string dir = (*first)->dir;
  first->reset();
  again->reset();
  CHECK(!std::filesystem::exists(dir));  // removed with its last user
}

}  // namespace
}  // namespace epoch::server
