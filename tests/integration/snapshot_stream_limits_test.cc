// Maintenance.Snapshot against a client that never reads: the stream is cancelled after
// --snapshot-send-timeout-ms without a message taken, the cut is counted in /metrics, its
// checkpoint is released, and the Raft loop keeps committing writes throughout.
#include <fmt/format.h>

#include <filesystem>
#include <random>
#include <thread>

#include "etcdserverpb/rpc.grpc.pb.h"
#include "support.h"

namespace epoch::integration {
namespace {

std::string RandomValue(std::size_t n, std::mt19937_64& rng) {
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  return s;
}

// Checkpoint directories (ckpt-N) in a member's <data-dir>/snap.
int CheckpointDirs(const std::string& data_dir) {
  int n = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(data_dir + "/snap", ec)) {
    if (e.path().filename().string().starts_with("ckpt-")) ++n;
  }
  return n;
}

TEST_CASE("a snapshot stream that is never read is cancelled and counted; writes go on",
          "[integration][limits]") {
  auto cluster =
      StartCluster(3, {"--tick-ms", "10", "--heartbeat-ticks", "5", "--election-timeout-ticks",
                       "15", "--snapshot-send-timeout-ms", "1000"});
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  auto kv = etcdserverpb::KV::NewStub(cluster->Channel(*leader));
  // ~19 MiB of incompressible values: far more than gRPC's flow-control windows hold.
  std::mt19937_64 rng(26);
  for (int i = 0; i < 300; ++i) {
    REQUIRE(Put(*kv, fmt::format("big/{:04}", i), RandomValue(64 << 10, rng)).ok());
  }

  // The abuser: its own connection, no BDP probing (the window stays at its 64 KiB default).
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  auto channel = grpc::CreateCustomChannel(cluster->node(*leader).client_address(),
                                           grpc::InsecureChannelCredentials(), args);
  auto maintenance = etcdserverpb::Maintenance::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = maintenance->Snapshot(&ctx, etcdserverpb::SnapshotRequest());

  // While the stream sits unread, writes keep committing, until the server cuts it.
  int writes = 0;
  bool cut = false;
  for (int i = 0; i < 400 && !cut; ++i) {
    REQUIRE(Put(*kv, fmt::format("during/{}", i % 10), "v").ok());
    ++writes;
    cut = cluster->Metric(*leader, "epoch_snapshot_streams_cut_total").value_or(0) >= 1;
    if (!cut) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO("writes committed while the stream was open: " << writes);
  REQUIRE(cut);
  CHECK(writes > 1);

  // What gRPC buffered before the cut can still be read; the archive cannot be finished.
  etcdserverpb::SnapshotResponse message;
  std::uint64_t bytes = 0;
  while (stream->Read(&message)) bytes += message.blob().size();
  grpc::Status status = stream->Finish();
  INFO("bytes read after the cut: " << bytes);
  CHECK(!status.ok());
  CHECK(bytes < 19u << 20);

  // The checkpoint is released once no stream holds it.
  const std::string data_dir = cluster->node(*leader).data_dir;
  bool released = false;
  for (int i = 0; i < 200 && !released; ++i) {
    released = CheckpointDirs(data_dir) == 0;
    if (!released) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(released);

  // Nobody else noticed: same leader, and a client that reads gets the whole archive.
  Result<int> after = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(after.ok());
  CHECK(*after == *leader);
  const std::string file = cluster->dir() + "/backup.db";
  CHECK_THAT(
      EtcdctlOk(*cluster, {"snapshot", "save", file}, {}, cluster->node(*leader).client_address()),
      Catch::Contains("Snapshot saved"));
  CHECK(cluster->Metric(*leader, "epoch_snapshot_streams_cut_total").value_or(0) == 1);
  RequireServing(*cluster, *leader, "after-unread-snapshot");
}

}  // namespace
}  // namespace epoch::integration
