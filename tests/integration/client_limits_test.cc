// Client-port limits: a client that sends without reading is cut off with RESOURCE_EXHAUSTED,
// its memory on the server stays bounded, the cut is counted in /metrics, and the cluster keeps
// its leader and serves everyone else.
#include <fmt/format.h>

#include <atomic>
#include <thread>

#include "etcdserverpb/rpc.grpc.pb.h"
#include "support.h"

namespace epoch::integration {
namespace {

TEST_CASE("a keep-alive stream whose answers are never read is cut off", "[integration][limits]") {
  auto cluster = StartCluster(3, {"--tick-ms", "10", "--heartbeat-ticks", "5",
                                  "--election-timeout-ticks", "15", "--keepalive-queue-max", "16"});
  Result<int> leader = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  auto lease = etcdserverpb::Lease::NewStub(cluster->Channel(*leader));
  etcdserverpb::LeaseGrantResponse granted;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    etcdserverpb::LeaseGrantRequest grant;
    grant.set_ttl(60);
    REQUIRE(lease->LeaseGrant(&ctx, grant, &granted).ok());
  }

  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  auto stream = lease->LeaseKeepAlive(&ctx);
  // The writer sends keep-alives without reading any answer, until the server stops reading
  // (its writes then block) or 200,000 were sent.
  std::atomic<int> sent{0};
  std::thread writer([&] {
    etcdserverpb::LeaseKeepAliveRequest request;
    request.set_id(granted.id());
    while (sent.load() < 200'000 && stream->Write(request)) sent.fetch_add(1);
  });
  bool cut = false;
  for (int i = 0; i < 600 && !cut; ++i) {
    cut = cluster->Metric(*leader, "epoch_lease_keepalive_streams_cut_total").value_or(0) >= 1;
    if (!cut) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  INFO("keep-alives sent: " << sent.load());
  CHECK(cut);
  // Reading now drains what was written before the cut, then the stream's status.
  etcdserverpb::LeaseKeepAliveResponse answer;
  int answers = 0;
  while (stream->Read(&answer)) ++answers;
  grpc::Status status = stream->Finish();
  writer.join();
  INFO("answers read: " << answers);
  CHECK(status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(answers < sent.load());

  // Nobody else noticed: same leader, the lease still renews on a new stream, writes work.
  Result<int> after = cluster->WaitForLeader(std::chrono::seconds(10));
  REQUIRE(after.ok());
  CHECK(*after == *leader);
  CHECK(EtcdctlOk(*cluster, {"lease", "keep-alive", "--once", Hex(granted.id())})
            .find("keepalived with TTL") != std::string::npos);
  RequireServing(*cluster, 1, "after-keepalive-flood");
}

}  // namespace
}  // namespace epoch::integration
