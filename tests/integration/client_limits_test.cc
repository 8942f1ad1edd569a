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

std::shared_ptr<grpc::Channel> OwnConnection(const std::string& address);

TEST_CASE("keep-alive streams past the per-address limit are refused and counted",
          "[integration][limits]") {
  auto cluster = StartCluster(1, {"--max-keepalive-streams-per-address", "2"});
  REQUIRE(cluster->WaitForLeader(std::chrono::seconds(10)).ok());
  auto lease = etcdserverpb::Lease::NewStub(cluster->Channel(0));
  etcdserverpb::LeaseGrantResponse granted;
  {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    etcdserverpb::LeaseGrantRequest grant;
    grant.set_ttl(60);
    REQUIRE(lease->LeaseGrant(&ctx, grant, &granted).ok());
  }
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(granted.id());
  struct Open {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<etcdserverpb::LeaseKeepAliveRequest,
                                             etcdserverpb::LeaseKeepAliveResponse>>
        stream;
  };
  // The client's other connection: gRPC knows the client port's connections by descriptor
  // ("fd:<n>"), and the limit is still the address's, not the connection's.
  auto other_connection =
      etcdserverpb::Lease::NewStub(OwnConnection(cluster->node(0).client_address()));
  // Opens a stream (on the other connection when asked) and sends one keep-alive; true when it
  // was answered.
  auto open = [&](Open& o, bool other = false) {
    o.ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    o.stream = (other ? other_connection : lease)->LeaseKeepAlive(&o.ctx);
    etcdserverpb::LeaseKeepAliveResponse answer;
    return o.stream->Write(request) && o.stream->Read(&answer) && answer.ttl() > 0;
  };
  auto first = std::make_unique<Open>();
  Open second, third;
  REQUIRE(open(*first));
  REQUIRE(open(second));
  CHECK_FALSE(open(third, /*other=*/true));
  grpc::Status refused = third.stream->Finish();
  CHECK(refused.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK(refused.error_message().find("--max-keepalive-streams-per-address") != std::string::npos);
  const std::string metric = "epoch_lease_keepalive_streams_refused_total{reason=\"per_address\"}";
  CHECK(cluster->Metric(0, metric).value_or(0) == 1);

  // A stream that ends gives its slot back.
  first->stream->WritesDone();
  CHECK(first->stream->Finish().ok());
  first.reset();
  REQUIRE(Eventually([&] { return cluster->Metric(0, "epoch_lease_keepalive_streams") == 1; }));
  Open fourth;
  CHECK(open(fourth));
  fourth.ctx.TryCancel();
  second.ctx.TryCancel();
  (void)fourth.stream->Finish();
  (void)second.stream->Finish();
}

// A channel with its own connection (gRPC shares connections between channels by default).
std::shared_ptr<grpc::Channel> OwnConnection(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
}

grpc::Status RangeWithin(const std::shared_ptr<grpc::Channel>& channel,
                         std::chrono::milliseconds timeout) {
  auto kv = etcdserverpb::KV::NewStub(channel);
  etcdserverpb::RangeRequest request;
  request.set_key("k");
  etcdserverpb::RangeResponse response;
  return Range(*kv, request, &response, timeout);
}

TEST_CASE("one connection holds at most --max-concurrent-streams calls", "[integration][limits]") {
  auto cluster =
      StartCluster(1, {"--tick-ms", "10", "--heartbeat-ticks", "5", "--election-timeout-ticks",
                       "15", "--max-concurrent-streams", "4"});
  const std::string address = cluster->node(0).client_address();
  auto busy = OwnConnection(address);
  REQUIRE(RangeWithin(busy, std::chrono::seconds(5)).ok());
  auto watch = etcdserverpb::Watch::NewStub(busy);
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  std::vector<std::unique_ptr<
      grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>>>
      streams;
  for (int i = 0; i < 4; ++i) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    streams.push_back(watch->Watch(contexts.back().get()));
    etcdserverpb::WatchRequest create;
    create.mutable_create_request()->set_key(fmt::format("w{}", i));
    REQUIRE(streams.back()->Write(create));
    etcdserverpb::WatchResponse created;
    REQUIRE(streams.back()->Read(&created));
    CHECK(created.created());
  }
  // A fifth call on the same connection waits for a free stream; another connection does not.
  CHECK(RangeWithin(busy, std::chrono::milliseconds(500)).error_code() ==
        grpc::StatusCode::DEADLINE_EXCEEDED);
  CHECK(RangeWithin(OwnConnection(address), std::chrono::seconds(5)).ok());
  // Closing one stream frees its slot.
  contexts.front()->TryCancel();
  etcdserverpb::WatchResponse ignored;
  while (streams.front()->Read(&ignored)) {
  }
  (void)streams.front()->Finish();
  CHECK(RangeWithin(busy, std::chrono::seconds(5)).ok());
  for (auto& c : contexts) c->TryCancel();
  for (std::size_t i = 1; i < streams.size(); ++i) (void)streams[i]->Finish();
}

}  // namespace
}  // namespace epoch::integration
