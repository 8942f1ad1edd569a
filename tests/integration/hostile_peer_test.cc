// Hostile peers on the plaintext peer port of a real cluster: a process that knows the cluster id
// and the member ids (both public: every response header and `member list` show them) connects
// and sends what no correct member sends. Each attack is dropped, the cluster keeps its leader
// and serves writes, and /metrics counts what was dropped (epoch_peer_frames_dropped_total and
// epoch_peer_connections_refused_total, by reason).
#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <limits>
#include <regex>
#include <thread>

#include "epoch/byte_coding.h"
#include "epoch/v1/internal.pb.h"
#include "raftpb/raft.pb.h"
#include "support.h"

namespace epoch::integration {
namespace {

using namespace std::chrono_literals;

std::string BigEndian(std::uint64_t v, int bytes) {
  std::string out;
  PutBigEndian(&out, v, bytes);
  return out;
}

std::string Framed(const std::string& payload) { return BigEndian(payload.size(), 4) + payload; }

// The transport's hello (server/peer/src/peer_transport.cc): magic, cluster id, member id.
std::string Hello(std::uint64_t cluster_id, std::uint64_t member) {
  return Framed("EPOCHP1\n" + BigEndian(cluster_id, 8) + BigEndian(member, 8));
}

std::string MessageFrame(raftpb::MessageType type, std::uint64_t from, std::uint64_t to,
                         std::uint64_t term) {
  raftpb::Frame frame;
  raftpb::Message* m = frame.mutable_message();
  m->set_type(type);
  m->set_from(from);
  m->set_to(to);
  m->set_term(term);
  return Framed(frame.SerializeAsString());
}

// A raw TCP connection to a peer port, from `source` (a loopback address).
class RawPeer {
 public:
  explicit RawPeer(std::uint16_t port, const char* source = "127.0.0.1") {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    ::inet_pton(AF_INET, source, &local.sin_addr);
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof(local)) == 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    ::inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawPeer() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawPeer(const RawPeer&) = delete;
  RawPeer& operator=(const RawPeer&) = delete;

  [[nodiscard]] bool connected() const { return connected_; }

  // Whether every byte was written (a closed connection fails the write).
  bool Send(const std::string& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<std::size_t>(n);
    }
    return true;
  }

  // Whether the node closed the connection within `timeout` (it never writes on it otherwise).
  bool ClosedWithin(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      const int ready = ::poll(&p, 1, 50);
      if (ready > 0) {
        char buf[256];
        const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
      }
    }
    return false;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// The sample `family{reason="<reason>"}` on node i's /metrics (0 when absent or unreadable).
std::uint64_t Dropped(const TestCluster& cluster, int i, const std::string& family,
                      const std::string& reason) {
  auto page = cluster.Http(i, "/metrics");
  if (!page.ok()) return 0;
  const std::string prefix = fmt::format("{}{{reason=\"{}\"}} ", family, reason);
  const auto at = page->body.find(prefix);
  if (at == std::string::npos) return 0;
  return std::stoull(page->body.substr(at + prefix.size()));
}

std::uint64_t FramesDropped(const TestCluster& cluster, int i, const std::string& reason) {
  return Dropped(cluster, i, "epoch_peer_frames_dropped_total", reason);
}

std::uint64_t ConnectionsRefused(const TestCluster& cluster, int i, const std::string& reason) {
  return Dropped(cluster, i, "epoch_peer_connections_refused_total", reason);
}

bool WaitCount(const std::function<std::uint64_t()>& count, std::uint64_t at_least) {
  return Eventually([&] { return count() >= at_least; }, 10s, 20ms);
}

struct Victim {
  int leader = -1;
  int follower = -1;  // the node attacked
  int other = -1;     // the third node, whose identity the attacker claims
  std::uint64_t cluster_id = 0;
  std::uint64_t term = 0;
};

Victim Survey(TestCluster& cluster) {
  Result<int> leader = cluster.WaitHealthy(20s);
  REQUIRE(leader.ok());
  Victim v;
  v.leader = *leader;
  v.follower = (*leader + 1) % 3;
  v.other = (*leader + 2) % 3;
  auto status = cluster.NodeStatus(v.follower);
  REQUIRE(status.ok());
  v.cluster_id = status->header().cluster_id();
  v.term = status->raftterm();
  return v;
}

// After an attack: the same leader in the same term, serving writes on every node.
void RequireUnharmed(TestCluster& cluster, const Victim& v, const std::string& probe) {
  for (int i = 0; i < cluster.size(); ++i) RequireServing(cluster, i, probe);
  Result<int> leader = cluster.WaitHealthy(10s);
  REQUIRE(leader.ok());
  CHECK(*leader == v.leader);
  auto status = cluster.NodeStatus(v.follower);
  REQUIRE(status.ok());
  CHECK(status->raftterm() == v.term);
  REQUIRE(cluster.CheckAlive().ok());
}

ClusterPtr StartHostileCluster() {
  test::ClusterOptions defaults;
  std::vector<std::string> flags = defaults.extra_flags;
  // Short limits, so the test sees them act: a frame must complete within 1 s.
  flags.insert(flags.end(),
               {"--peer-frame-timeout-ms", "1000", "--peer-max-connections-per-address", "16"});
  return StartCluster(3, flags);
}

TEST_CASE("hostile peer: a term of 2^64-1 is refused and the term never moves",
          "[integration][hostile_peer]") {
  auto cluster = StartHostileCluster();
  const Victim v = Survey(*cluster);
  const std::uint64_t self = cluster->node(v.follower).member_id;
  const std::uint64_t claimed = cluster->node(v.other).member_id;
  RawPeer peer(cluster->node(v.follower).peer_port);
  REQUIRE(peer.connected());
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  REQUIRE(peer.Send(Hello(v.cluster_id, claimed) +
                    MessageFrame(raftpb::REQUEST_VOTE, claimed, self, max) +
                    MessageFrame(raftpb::HEARTBEAT, claimed, self, max) +
                    MessageFrame(raftpb::APPEND_ENTRIES, claimed, self, std::uint64_t{1} << 62)));
  CHECK(WaitCount([&] { return FramesDropped(*cluster, v.follower, "malformed"); }, 3));
  RequireUnharmed(*cluster, v, "probe/term");
}

TEST_CASE("hostile peer: a forged TimeoutNow does not unseat the leader",
          "[integration][hostile_peer]") {
  auto cluster = StartHostileCluster();
  const Victim v = Survey(*cluster);
  const std::uint64_t self = cluster->node(v.follower).member_id;
  const std::uint64_t follower = cluster->node(v.other).member_id;
  const std::uint64_t leader = cluster->node(v.leader).member_id;
  RawPeer peer(cluster->node(v.follower).peer_port);
  REQUIRE(peer.Send(Hello(v.cluster_id, follower)));
  // From a follower, in the current term and the next one.
  REQUIRE(peer.Send(MessageFrame(raftpb::TIMEOUT_NOW, follower, self, v.term)));
  REQUIRE(peer.Send(MessageFrame(raftpb::TIMEOUT_NOW, follower, self, v.term + 1)));
  CHECK(
      WaitCount([&] { return FramesDropped(*cluster, v.follower, "timeout_now_not_leader"); }, 2));
  // "From the leader" on the follower's connection: the sender is the connection's member.
  REQUIRE(peer.Send(MessageFrame(raftpb::TIMEOUT_NOW, leader, self, v.term)));
  CHECK(WaitCount([&] { return FramesDropped(*cluster, v.follower, "sender_mismatch"); }, 1));
  RequireUnharmed(*cluster, v, "probe/timeout-now");
}

TEST_CASE("hostile peer: forged forwarded writes and member URLs are refused",
          "[integration][hostile_peer]") {
  auto cluster = StartHostileCluster();
  const Victim v = Survey(*cluster);
  const std::uint64_t follower = cluster->node(v.other).member_id;
  const std::uint64_t leader_id = cluster->node(v.leader).member_id;
  const std::string members_before = EtcdctlOk(*cluster, {"member", "list"});

  // A stranger's hello: not a member, refused before any frame is read.
  RawPeer stranger(cluster->node(v.leader).peer_port);
  v1::InternalRequest put;
  put.mutable_put()->set_key("forged/stranger");
  put.mutable_put()->set_value("x");
  raftpb::Frame forward;
  forward.mutable_forward_request()->set_id(1);
  put.SerializeToString(forward.mutable_forward_request()->mutable_request());
  REQUIRE(stranger.Send(Hello(v.cluster_id, 0x5eed) + Framed(forward.SerializeAsString())));
  CHECK(stranger.ClosedWithin(5s));
  CHECK(WaitCount([&] { return ConnectionsRefused(*cluster, v.leader, "not_member"); }, 1));

  // A follower publishing client URLs for the leader.
  RawPeer peer(cluster->node(v.leader).peer_port);
  v1::InternalRequest publish;
  publish.mutable_member_attributes()->set_id(leader_id);
  publish.mutable_member_attributes()->set_name("n-forged");
  publish.mutable_member_attributes()->add_client_urls("http://10.66.66.66:2379");
  raftpb::Frame forged;
  forged.mutable_forward_request()->set_id(2);
  publish.SerializeToString(forged.mutable_forward_request()->mutable_request());
  REQUIRE(peer.Send(Hello(v.cluster_id, follower) + Framed(forged.SerializeAsString())));
  CHECK(WaitCount([&] { return FramesDropped(*cluster, v.leader, "forward_forged"); }, 1));

  // An answer to a forward nobody sent.
  raftpb::Frame answer;
  answer.mutable_forward_response()->set_id(12345);
  REQUIRE(peer.Send(Framed(answer.SerializeAsString())));
  CHECK(WaitCount([&] { return FramesDropped(*cluster, v.leader, "forward_unknown"); }, 1));

  RequireUnharmed(*cluster, v, "probe/forward");
  CHECK(MustRange(*cluster, v.leader, "forged/stranger").kvs_size() == 0);
  const std::string members_after = EtcdctlOk(*cluster, {"member", "list"});
  CHECK(members_after == members_before);
  CHECK(members_after.find("10.66.66.66") == std::string::npos);
}

TEST_CASE("hostile peer: a snapshot chunk not from the leader is refused",
          "[integration][hostile_peer]") {
  auto cluster = StartHostileCluster();
  const Victim v = Survey(*cluster);
  const std::uint64_t self = cluster->node(v.follower).member_id;
  const std::uint64_t follower = cluster->node(v.other).member_id;
  const std::uint64_t leader = cluster->node(v.leader).member_id;
  auto chunk = [&](std::uint64_t from) {
    raftpb::Frame frame;
    raftpb::Message* m = frame.mutable_message();
    m->set_type(raftpb::INSTALL_SNAPSHOT);
    m->set_from(from);
    m->set_to(self);
    m->set_term(v.term);
    raftpb::SnapshotChunk* c = m->mutable_snapshot();
    c->set_transfer_id(7);
    c->mutable_meta()->set_index(1'000'000);
    c->mutable_meta()->set_term(v.term);
    c->mutable_meta()->mutable_conf()->add_voters(follower);
    c->set_file(".epoch-manifest");
    c->set_data("");
    c->set_last(true);
    c->set_total_bytes(1);
    return Framed(frame.SerializeAsString());
  };
  RawPeer peer(cluster->node(v.follower).peer_port);
  REQUIRE(peer.Send(Hello(v.cluster_id, follower) + chunk(follower)));
  CHECK(WaitCount([&] { return FramesDropped(*cluster, v.follower, "snapshot_not_leader"); }, 1));
  // A chunk "from the leader" on the follower's connection.
  REQUIRE(peer.Send(chunk(leader)));
  CHECK(WaitCount([&] { return FramesDropped(*cluster, v.follower, "sender_mismatch"); }, 1));
  RequireUnharmed(*cluster, v, "probe/snapshot");
  auto status = cluster->NodeStatus(v.follower);
  REQUIRE(status.ok());
  CHECK(status->raftindex() < 1'000'000);
}

TEST_CASE("hostile peer: a frame for another member than the connection's is dropped",
          "[integration][hostile_peer]") {
  auto cluster = StartHostileCluster();
  const Victim v = Survey(*cluster);
  const std::uint64_t self = cluster->node(v.follower).member_id;
  const std::uint64_t follower = cluster->node(v.other).member_id;
  const std::uint64_t leader = cluster->node(v.leader).member_id;
  RawPeer peer(cluster->node(v.follower).peer_port);
  // A heartbeat in the next term "from the leader" would make the follower adopt that term.
  REQUIRE(peer.Send(Hello(v.cluster_id, follower) +
                    MessageFrame(raftpb::HEARTBEAT, leader, self, v.term + 1)));
  // A message for the leader sent to the follower.
  REQUIRE(peer.Send(MessageFrame(raftpb::HEARTBEAT, follower, leader, v.term)));
  CHECK(WaitCount([&] { return FramesDropped(*cluster, v.follower, "sender_mismatch"); }, 1));
  CHECK(WaitCount([&] { return FramesDropped(*cluster, v.follower, "wrong_recipient"); }, 1));
  RequireUnharmed(*cluster, v, "probe/mismatch");
}

TEST_CASE("hostile peer: a half-sent 64 MiB frame is cut off at the read deadline",
          "[integration][hostile_peer]") {
  auto cluster = StartHostileCluster();
  const Victim v = Survey(*cluster);
  const std::uint64_t follower = cluster->node(v.other).member_id;
  RawPeer peer(cluster->node(v.follower).peer_port);
  REQUIRE(peer.Send(Hello(v.cluster_id, follower) + BigEndian(64U << 20, 4) +
                    std::string(1 << 20, 'x')));
  // --peer-frame-timeout-ms 1000: closed between 0.5 and 1 s after the first bytes (bounded
  // wait far above that).
  CHECK(peer.ClosedWithin(10s));
  CHECK(WaitCount([&] { return FramesDropped(*cluster, v.follower, "partial_frame_timeout"); }, 1));
  // Over the frame-size limit: closed on the length prefix.
  RawPeer huge(cluster->node(v.follower).peer_port);
  REQUIRE(huge.Send(Hello(v.cluster_id, follower) + BigEndian((64U << 20) + 1, 4)));
  CHECK(huge.ClosedWithin(5s));
  CHECK(WaitCount([&] { return FramesDropped(*cluster, v.follower, "frame_too_large"); }, 1));
  RequireUnharmed(*cluster, v, "probe/half-frame");
}

TEST_CASE("hostile peer: 1,000 idle connections are capped and the cluster keeps its leader",
          "[integration][hostile_peer]") {
  rlimit files{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &files) == 0);
  if (files.rlim_cur < 1200 && files.rlim_max >= 1200) {
    files.rlim_cur = 1200;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &files) == 0);
  }
  REQUIRE(files.rlim_cur >= 1200);
  auto cluster = StartHostileCluster();
  const Victim v = Survey(*cluster);
  std::vector<std::unique_ptr<RawPeer>> idle;
  // From an address no member uses (127.0.0.9), so the per-address cap is the attacker's alone.
  for (int i = 0; i < 1000; ++i) {
    idle.push_back(std::make_unique<RawPeer>(cluster->node(v.leader).peer_port, "127.0.0.9"));
  }
  // --peer-max-connections-per-address 16: the rest are closed as soon as accepted.
  CHECK(WaitCount([&] { return ConnectionsRefused(*cluster, v.leader, "per_address_limit"); },
                  1000 - 16));
  RequireUnharmed(*cluster, v, "probe/idle");
  // The 16 admitted ones sent no hello: closed after the hello timeout (5 s).
  CHECK(WaitCount([&] { return ConnectionsRefused(*cluster, v.leader, "hello_timeout"); }, 16));
  idle.clear();
  RequireUnharmed(*cluster, v, "probe/idle-after");
}

TEST_CASE("hostile peer: two clusters with the same names and default token refuse each other",
          "[integration][hostile_peer]") {
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.cluster_token = "epoch-cluster";  // epochd's default --initial-cluster-token
  auto a = TestCluster::Start(options);
  REQUIRE(a.ok());
  auto b = TestCluster::Start(options);
  REQUIRE(b.ok());
  TestCluster& one = **a;
  TestCluster& two = **b;
  REQUIRE(one.node(1).member_id == two.node(1).member_id);  // same names, same token
  auto status_one = one.NodeStatus(1);
  auto status_two = two.NodeStatus(1);
  REQUIRE(status_one.ok());
  REQUIRE(status_two.ok());
  const std::uint64_t id_one = status_one->header().cluster_id();
  const std::uint64_t id_two = status_two->header().cluster_id();
  CHECK(id_one != id_two);
  CHECK(ReadFileIfExists(one.node(0).log_path).find("default --initial-cluster-token") !=
        std::string::npos);

  // Cluster two's n1, as its transport would introduce itself, at cluster one's n2.
  RawPeer peer(one.node(1).peer_port);
  REQUIRE(peer.Send(Hello(id_two, two.node(0).member_id)));
  CHECK(peer.ClosedWithin(5s));
  CHECK(WaitCount([&] { return ConnectionsRefused(one, 1, "wrong_cluster"); }, 1));
  for (int i = 0; i < 3; ++i) {
    RequireServing(one, i, "probe/one");
    RequireServing(two, i, "probe/two");
  }
  CHECK(one.WaitHealthy(10s).ok());
  CHECK(two.WaitHealthy(10s).ok());
}

TEST_CASE("epochd keeps its data directory to its owner", "[integration][hostile_peer]") {
  auto cluster = StartCluster(1);
  REQUIRE(cluster->WaitHealthy(10s).ok());
  RequireServing(*cluster, 0, "probe/perms");
  namespace fs = std::filesystem;
  const fs::perms open_to_others = fs::perms::group_all | fs::perms::others_all;
  const std::string dir = cluster->node(0).data_dir;
  CHECK((fs::status(dir).permissions() & open_to_others) == fs::perms::none);
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    INFO(entry.path().string());
    CHECK((entry.symlink_status().permissions() & open_to_others) == fs::perms::none);
    ++files;
  }
  CHECK(files > 3);  // the WAL and the state machine's files were checked
}

}  // namespace
}  // namespace epoch::integration
