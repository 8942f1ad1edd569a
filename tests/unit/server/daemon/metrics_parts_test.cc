// The daemon's metrics and health parts on their own: the client port's protocol classification,
// the peer metrics' heartbeat round trips, the durability watch, the gRPC method labels and the
// process metrics.
#include <catch2/catch.hpp>
#include <chrono>
#include <ctime>
#include <string>
#include <vector>

#include "client_port_mux.h"
#include "durability_watch.h"
#include "grpc_metrics.h"
#include "peer_metrics.h"
#include "process_metrics.h"

namespace epoch::server {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

TEST_CASE("client port: the first bytes say gRPC, HTTP/1 or neither", "[daemon][metrics]") {
  CHECK(ClassifyClientBytes("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") == ClientProtocol::kGrpc);
  CHECK(ClassifyClientBytes("PRI") == ClientProtocol::kGrpc);
  CHECK(ClassifyClientBytes("PR") == ClientProtocol::kUnknownYet);
  CHECK(ClassifyClientBytes("") == ClientProtocol::kUnknownYet);
  CHECK(ClassifyClientBytes("GET /metrics HTTP/1.1\r\n") == ClientProtocol::kHttp);
  CHECK(ClassifyClientBytes("HEAD / HTTP/1.0") == ClientProtocol::kHttp);
  CHECK(ClassifyClientBytes("GE") == ClientProtocol::kUnknownYet);
  CHECK(ClassifyClientBytes("OPTIONS * HTTP/1.1") == ClientProtocol::kHttp);
  // A TLS ClientHello, lower case, a leading space, an endless token: none of them.
  CHECK(ClassifyClientBytes(std::string("\x16\x03\x01\x02\x00", 5)) == ClientProtocol::kNeither);
  CHECK(ClassifyClientBytes("get / HTTP/1.0") == ClientProtocol::kNeither);
  CHECK(ClassifyClientBytes(" GET") == ClientProtocol::kNeither);
  CHECK(ClassifyClientBytes("ABCDEFGHIJ") == ClientProtocol::kNeither);
  // Not the preface: an upper-case token is a method for the HTTP side (which answers 405).
  CHECK(ClassifyClientBytes("PRX * HTTP/2.0") == ClientProtocol::kHttp);
}

TEST_CASE("listen addresses: IPs, bracketed IPv6 and localhost", "[daemon][metrics]") {
  Result<asio::ip::tcp::endpoint> v4 = ListenEndpoint("127.0.0.2", 2379);
  REQUIRE(v4.ok());
  CHECK(v4->address().to_string() == "127.0.0.2");
  CHECK(v4->port() == 2379);
  Result<asio::ip::tcp::endpoint> v6 = ListenEndpoint("[::1]", 0);
  REQUIRE(v6.ok());
  CHECK(v6->address().to_string() == "::1");
  Result<asio::ip::tcp::endpoint> any = ListenEndpoint("0.0.0.0", 1);
  REQUIRE(any.ok());
  CHECK(any->address().is_unspecified());
  Result<asio::ip::tcp::endpoint> local = ListenEndpoint("localhost", 2379);
  REQUIRE(local.ok());
  CHECK(local->address().is_loopback());
}

TEST_CASE("peer metrics: a heartbeat's round trip is timed to the answer of its round",
          "[daemon][metrics]") {
  const NodeId peer(0xabc);
  PeerMetrics metrics({peer});
  const Clock::time_point t0 = Clock::now();
  metrics.HeartbeatSent(peer, 7, t0);
  metrics.HeartbeatSent(peer, 8, t0 + milliseconds(1));      // one timed at a time: not this one
  metrics.HeartbeatAnswered(peer, 6, t0 + milliseconds(2));  // an older round: ignored
  metrics.HeartbeatAnswered(NodeId(0xdef), 7, t0 + milliseconds(2));  // not a member: ignored
  metrics.HeartbeatAnswered(peer, 7, t0 + milliseconds(3));
  metrics.HeartbeatAnswered(peer, 7, t0 + milliseconds(4));  // answered twice: counted once
  metrics.Sent(peer, 100);
  metrics.Received(peer, 40);
  metrics.HeartbeatSendFailed();

  std::string out;
  MetricsText m(&out);
  metrics.Render(m, [](NodeId) { return std::uint64_t{3}; });
  CHECK(out.find("etcd_network_peer_sent_bytes_total{To=\"abc\"} 100\n") != std::string::npos);
  CHECK(out.find("etcd_network_peer_received_bytes_total{From=\"abc\"} 40\n") != std::string::npos);
  CHECK(out.find("etcd_network_peer_sent_failures_total{To=\"abc\"} 3\n") != std::string::npos);
  CHECK(out.find("etcd_network_peer_round_trip_time_seconds_count{To=\"abc\"} 1\n") !=
        std::string::npos);
  CHECK(out.find("etcd_network_peer_round_trip_time_seconds_sum{To=\"abc\"} 0.003\n") !=
        std::string::npos);
  // 3 ms falls in the 3.2 ms bucket, not the 1.6 ms one.
  CHECK(
      out.find("etcd_network_peer_round_trip_time_seconds_bucket{To=\"abc\",le=\"0.0016\"} 0\n") !=
      std::string::npos);
  CHECK(
      out.find("etcd_network_peer_round_trip_time_seconds_bucket{To=\"abc\",le=\"0.0032\"} 1\n") !=
      std::string::npos);
  CHECK(out.find("etcd_server_heartbeat_send_failures_total 1\n") != std::string::npos);
}

// A DurableLog whose writes complete when the test says so.
class HeldLog final : public DurableLog {
 public:
  void Persist(const std::optional<raft::SnapshotMeta>&, const std::vector<raft::Entry>&,
               const std::optional<raft::HardState>&, bool, DoneCallback done) override {
    held.push_back(std::move(done));
  }
  Status Compact(LogIndex, const raft::ConfState&) override { return Status::Ok(); }
  [[nodiscard]] raft::HardState InitialHardState() const override { return {}; }
  [[nodiscard]] raft::SnapshotMeta LastSnapshot() const override { return {}; }
  [[nodiscard]] LogIndex FirstIndex() const override { return LogIndex(1); }
  [[nodiscard]] LogIndex LastIndex() const override { return LogIndex(0); }
  [[nodiscard]] std::optional<Term> TermAt(LogIndex) const override { return std::nullopt; }
  [[nodiscard]] std::vector<raft::Entry> Entries(LogIndex, LogIndex, std::uint64_t) const override {
    return {};
  }
  std::vector<DoneCallback> held;
};

TEST_CASE("durability watch: the oldest write not yet durable is timed", "[daemon][metrics]") {
  HeldLog log;
  DurabilityWatch watch(log);
  CHECK_FALSE(watch.OldestPendingAge(Clock::now()).has_value());
  int done = 0;
  watch.Persist(std::nullopt, {}, std::nullopt, true, [&](Status s) { done += s.ok() ? 1 : 0; });
  const Clock::time_point after_first = Clock::now();
  watch.Persist(std::nullopt, {}, std::nullopt, true, [&](Status s) { done += s.ok() ? 1 : 0; });
  REQUIRE(log.held.size() == 2);
  // The first write's age: at least the time since it was submitted.
  auto age = watch.OldestPendingAge(after_first + milliseconds(600));
  REQUIRE(age.has_value());
  CHECK(*age >= milliseconds(600));
  log.held[0](Status::Ok());
  CHECK(done == 1);
  CHECK(watch.OldestPendingAge(Clock::now()).has_value());  // the second is still waiting
  log.held[1](Status::Ok());
  CHECK(done == 2);
  CHECK_FALSE(watch.OldestPendingAge(Clock::now()).has_value());
}

TEST_CASE("gRPC metrics: labels from the full method name, Go's code names", "[daemon][metrics]") {
  GrpcMetrics metrics;
  using Type = grpc::experimental::ServerRpcInfo::Type;
  GrpcMetrics::MethodStats& range = metrics.Method("/etcdserverpb.KV/Range", Type::UNARY);
  CHECK(range.service == "etcdserverpb.KV");
  CHECK(range.method == "Range");
  CHECK(range.type == "unary");
  CHECK(&metrics.Method("/etcdserverpb.KV/Range", Type::UNARY) == &range);
  CHECK(metrics.Method("/etcdserverpb.Watch/Watch", Type::BIDI_STREAMING).type == "bidi_stream");
  CHECK(std::string(GrpcMetrics::CodeName(0)) == "OK");
  CHECK(std::string(GrpcMetrics::CodeName(1)) == "Canceled");
  CHECK(std::string(GrpcMetrics::CodeName(14)) == "Unavailable");
  CHECK(std::string(GrpcMetrics::CodeName(16)) == "Unauthenticated");
  CHECK(std::string(GrpcMetrics::CodeName(99)) == "Unknown");
  range.started.fetch_add(2);
  range.handled[5].fetch_add(1);
  std::string out;
  MetricsText m(&out);
  metrics.Render(m);
  CHECK(out.find("grpc_server_started_total{grpc_method=\"Range\",grpc_service=\"etcdserverpb.KV\","
                 "grpc_type=\"unary\"} 2\n") != std::string::npos);
  CHECK(out.find("grpc_server_handled_total{grpc_code=\"NotFound\",grpc_method=\"Range\","
                 "grpc_service=\"etcdserverpb.KV\",grpc_type=\"unary\"} 1\n") != std::string::npos);
}

TEST_CASE("process metrics come from /proc", "[daemon][metrics]") {
  // Some CPU time first (bounded: at most 5 s of wall time), so the counter has ticks to show.
  const auto until = Clock::now() + std::chrono::seconds(5);
  volatile std::uint64_t spin = 0;
  while (std::clock() < CLOCKS_PER_SEC / 20 && Clock::now() < until) spin = spin + 1;
  REQUIRE(std::clock() >= CLOCKS_PER_SEC / 20);
  std::string out;
  MetricsText m(&out);
  RenderProcessMetrics(m);
  for (const char* name :
       {"process_cpu_seconds_total ", "process_resident_memory_bytes ", "process_open_fds ",
        "process_max_fds ", "process_start_time_seconds ", "process_virtual_memory_bytes "}) {
    INFO(name);
    const std::size_t at = out.find(std::string("\n") + name);
    REQUIRE(at != std::string::npos);
    CHECK(std::stod(out.substr(at + 1 + std::string(name).size())) > 0);
  }
}

}  // namespace
}  // namespace epoch::server
