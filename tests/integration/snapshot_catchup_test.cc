// A follower that was down while the leader compacted its log past the follower's last entry
// catches up from a Raft snapshot streamed in chunks, ends with the leader's exact state, and
// keeps it across its own restart (server/SNAPSHOT.md §3, §4).
#include <fmt/format.h>

#include "epoch/test_support/eventually.h"
#include "support.h"

namespace epoch::integration {
namespace {

using namespace std::chrono_literals;
using test_support::Eventually;
using test_support::kProcessPoll;

// Snapshots streamed by every member but `follower`.
double SentByOthers(TestCluster& cluster, int follower) {
  double sent = 0;
  for (int i = 0; i < cluster.size(); ++i) {
    if (i != follower) sent += cluster.Metric(i, "epoch_snapshots_sent_total").value_or(0);
  }
  return sent;
}

grpc::Status HashKV(TestCluster& cluster, int i, std::int64_t revision,
                    etcdserverpb::HashKVResponse* out) {
  auto stub = etcdserverpb::Maintenance::NewStub(cluster.Channel(i));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 5s);
  etcdserverpb::HashKVRequest request;
  request.set_revision(revision);
  return stub->HashKV(&ctx, request, out);
}

// Node i's own copy (serializable read) of every key under "catchup/".
Result<etcdserverpb::RangeResponse> LocalDump(TestCluster& cluster, int i) {
  auto kv = etcdserverpb::KV::NewStub(cluster.Channel(i));
  etcdserverpb::RangeRequest request;
  request.set_key("catchup/");
  request.set_range_end(PrefixEnd("catchup/"));
  request.set_serializable(true);
  etcdserverpb::RangeResponse response;
  grpc::Status s = Range(*kv, request, &response, 2s);
  if (!s.ok()) return Status::Unavailable(s.error_message());
  return response;
}

// Node i's own answer (serializable) for `key` at `revision`.
Result<etcdserverpb::RangeResponse> LocalGetAt(TestCluster& cluster, int i, const std::string& key,
                                               std::int64_t revision) {
  auto kv = etcdserverpb::KV::NewStub(cluster.Channel(i));
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  request.set_revision(revision);
  request.set_serializable(true);
  etcdserverpb::RangeResponse response;
  grpc::Status s = Range(*kv, request, &response, 2s);
  if (!s.ok()) return Status::Unavailable(s.error_message());
  return response;
}

bool SameKvs(const etcdserverpb::RangeResponse& a, const etcdserverpb::RangeResponse& b) {
  if (a.kvs_size() != b.kvs_size()) return false;
  for (int k = 0; k < a.kvs_size(); ++k) {
    if (a.kvs(k).SerializeAsString() != b.kvs(k).SerializeAsString()) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a follower restarted after the log was compacted catches up from a snapshot",
          "[integration][snapshot]") {
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  // Compact after 300 entries, keep 50; small chunks so the image travels in many of them.
  for (const char* flag : {"--snapshot-count", "300", "--snapshot-catchup-entries", "50",
                           "--snapshot-chunk-bytes", "16384"}) {
    options.extra_flags.emplace_back(flag);
  }
  auto started = TestCluster::Start(options);
  INFO(started.status().ToString());
  REQUIRE(started.ok());
  TestCluster& cluster = **started;
  Result<int> leader = cluster.WaitForLeader(10s);
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % cluster.size();
  auto kv = etcdserverpb::KV::NewStub(cluster.Channel(*leader));
  for (int i = 0; i < 20; ++i) REQUIRE(Put(*kv, fmt::format("catchup/early/{}", i), "x").ok());

  Result<etcdserverpb::StatusResponse> status = cluster.NodeStatus(follower);
  REQUIRE(status.ok());
  const std::uint64_t follower_last = status->raftindex();
  REQUIRE(cluster.Stop(follower).ok());

  // Enough writes for several compactions; values large enough that the image is many chunks.
  const std::string value(512, 'v');
  for (int i = 0; i < 1500; ++i) {
    grpc::Status put = Put(*kv, fmt::format("catchup/{:05}", i), value + std::to_string(i));
    INFO("put " << i << ": " << put.error_message());
    REQUIRE(put.ok());
  }
  REQUIRE(Put(*kv, "catchup/00000", "rewritten").ok());
  const double compactions = cluster.Metric(*leader, "epoch_log_compactions_total").value_or(-1);
  const double first_index = cluster.Metric(*leader, "epoch_raft_first_index").value_or(-1);
  fmt::print(
      "catch-up: follower stopped at index {}; the leader compacted {} times, its log now "
      "starts at {}\n",
      follower_last, compactions, first_index);
  CHECK(compactions >= 3);
  // The entries the follower needs next are gone from the leader's log.
  REQUIRE(first_index > static_cast<double>(follower_last + 1));

  auto restarted_at = std::chrono::steady_clock::now();
  REQUIRE(cluster.StartNode(follower).ok());
  Result<etcdserverpb::RangeResponse> want = LocalDump(cluster, *leader);
  REQUIRE(want.ok());
  REQUIRE(want->kvs_size() == 1520);
  // Server side first (a fresh HTTP connection per poll): the follower applied what the leader
  // had applied after the last write. (The gRPC channel to it may still be in reconnect backoff.)
  const double leader_applied = cluster.Metric(*leader, "epoch_raft_applied_index").value_or(-1);
  REQUIRE(leader_applied > static_cast<double>(follower_last));
  const bool applied = Eventually(
      [&] {
        return cluster.Metric(follower, "epoch_raft_applied_index").value_or(-1) >= leader_applied;
      },
      30s, kProcessPoll);
  const auto applied_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::steady_clock::now() - restarted_at)
                              .count();
  CHECK(applied);
  bool caught_up = Eventually(
      [&] {
        Result<etcdserverpb::RangeResponse> got = LocalDump(cluster, follower);
        return got.ok() && SameKvs(*got, *want);
      },
      30s, kProcessPoll);
  INFO(cluster.LogTail(follower));
  REQUIRE(caught_up);
  // Counted by whichever member led when the follower came back (a stalled machine can move
  // the leader during the 1500 puts, which still reach it by forwarding), and only once the
  // follower's final ack has reached it.
  double sent = 0;
  Eventually(
      [&] {
        sent = SentByOthers(cluster, follower);
        return sent >= 1;
      },
      10s, kProcessPoll);
  const double installed = cluster.Metric(follower, "epoch_snapshots_installed_total").value_or(-1);
  fmt::print(
      "catch-up: follower applied up to the leader's index {} {} ms after its restart; "
      "snapshots sent by the other members: {}, installed by it: {}\n",
      leader_applied, applied_ms, sent, installed);
  CHECK(sent >= 1);
  CHECK(installed >= 1);

  // The installed image rebuilt the follower's in-memory per-key history: the same keys and
  // revisions as the leader's, and a read at an older revision answers alike (the value
  // "catchup/00000" had before it was rewritten).
  CHECK(cluster.Metric(follower, "epoch_kv_index_revisions").value_or(-1) >= 1521);
  CHECK(cluster.Metric(follower, "epoch_kv_index_revisions").value_or(-1) ==
        cluster.Metric(*leader, "epoch_kv_index_revisions").value_or(-1));
  CHECK(cluster.Metric(follower, "epoch_kv_index_keys").value_or(-1) ==
        cluster.Metric(*leader, "epoch_kv_index_keys").value_or(-1));
  const std::int64_t before_rewrite = want->header().revision() - 1;
  Result<etcdserverpb::RangeResponse> old_leader =
      LocalGetAt(cluster, *leader, "catchup/00000", before_rewrite);
  Result<etcdserverpb::RangeResponse> old_follower =
      LocalGetAt(cluster, follower, "catchup/00000", before_rewrite);
  REQUIRE(old_leader.ok());
  REQUIRE(old_follower.ok());
  REQUIRE(old_leader->kvs_size() == 1);
  CHECK(old_leader->kvs(0).value() == value + "0");
  CHECK(SameKvs(*old_leader, *old_follower));

  // Same MVCC history hash at the same revision on both (etcd's corruption check).
  const std::int64_t revision = want->header().revision();
  etcdserverpb::HashKVResponse leader_hash, follower_hash;
  REQUIRE(HashKV(cluster, *leader, revision, &leader_hash).ok());
  REQUIRE(HashKV(cluster, follower, revision, &follower_hash).ok());
  CHECK(leader_hash.hash() == follower_hash.hash());
  CHECK(leader_hash.compact_revision() == follower_hash.compact_revision());

  // The installed snapshot is durable: the follower restarts from it and keeps following.
  REQUIRE(cluster.Stop(follower).ok());
  REQUIRE(cluster.StartNode(follower).ok());
  REQUIRE(Put(*kv, "catchup/after", "restart").ok());
  Result<etcdserverpb::RangeResponse> want2 = LocalDump(cluster, *leader);
  REQUIRE(want2.ok());
  CHECK(Eventually(
      [&] {
        Result<etcdserverpb::RangeResponse> got = LocalDump(cluster, follower);
        return got.ok() && SameKvs(*got, *want2);
      },
      30s, kProcessPoll));
  Result<int> healthy = cluster.WaitHealthy(30s);
  INFO(healthy.status().ToString());
  CHECK(healthy.ok());
  CHECK(cluster.CheckAlive().ok());
}

}  // namespace epoch::integration
