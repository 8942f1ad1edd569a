#include "hostile_peer_support.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <limits>
#include <sstream>

#include "epoch/byte_coding.h"
#include "epoch/chaos/register_workload.h"
#include "epoch/lincheck/checker.h"
#include "epoch/test_support/test_pki.h"

namespace epoch::integration::hostile {

using namespace std::chrono_literals;

// --- Pki ---

Pki::Pki() {
  MakeCa("ca");
  for (const char* name : {"n1", "n2", "n3"}) Issue(name, name);
}

void Pki::MakeCa(const std::string& name) {
  const Status made = test::MakeTestCa(dir_.path(), name);
  INFO(made.ToString());
  REQUIRE(made.ok());
}

void Pki::Issue(const std::string& file, const std::string& cn, const std::string& ca) {
  const Status issued = test::IssueTestCertificate(dir_.path(), file, cn, ca);
  INFO(issued.ToString());
  REQUIRE(issued.ok());
}

std::vector<std::string> Pki::PeerFlags(const std::string& cert_of) const {
  return test::PeerTlsFlags(dir_.path(), cert_of);
}

// --- RawPeer ---

struct RawPeer::Tls {
  SSL_CTX* ctx = nullptr;
  SSL* ssl = nullptr;
  ~Tls() {
    if (ssl != nullptr) SSL_free(ssl);
    if (ctx != nullptr) SSL_CTX_free(ctx);
  }
};

RawPeer::RawPeer(std::uint16_t port, const char* source, const AttackerCert* tls) {
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
  if (!connected_ || tls == nullptr) return;
  // Blocking calls are bounded: the node's handshake deadline is 5 s.
  const timeval timeout{10, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  tls_ = std::make_unique<Tls>();
  tls_->ctx = SSL_CTX_new(TLS_client_method());
  REQUIRE(tls_->ctx != nullptr);
  SSL_CTX_set_verify(tls_->ctx, SSL_VERIFY_NONE, nullptr);
  if (!tls->cert_file.empty()) {
    REQUIRE(SSL_CTX_use_certificate_chain_file(tls_->ctx, tls->cert_file.c_str()) == 1);
    REQUIRE(SSL_CTX_use_PrivateKey_file(tls_->ctx, tls->key_file.c_str(), SSL_FILETYPE_PEM) == 1);
  }
  tls_->ssl = SSL_new(tls_->ctx);
  REQUIRE(tls_->ssl != nullptr);
  SSL_set_fd(tls_->ssl, fd_);
  connected_ = SSL_connect(tls_->ssl) == 1;
  ERR_clear_error();
}

RawPeer::~RawPeer() {
  tls_.reset();
  if (fd_ >= 0) ::close(fd_);
}

bool RawPeer::Send(const std::string& bytes) {
  if (!connected_) return false;
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = 0;
    if (tls_) {
      const int chunk = static_cast<int>(std::min<std::size_t>(bytes.size() - done, 1 << 20));
      n = SSL_write(tls_->ssl, bytes.data() + done, chunk);
      ERR_clear_error();
    } else {
      n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    }
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

bool RawPeer::ClosedWithin(std::chrono::milliseconds timeout) {
  if (!connected_) return true;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 50) <= 0) continue;
    char buf[256];
    if (tls_) {
      // The node sends no application data: a read that ends is the close (or an alert).
      const int n = SSL_read(tls_->ssl, buf, sizeof buf);
      const int error = n > 0 ? SSL_ERROR_NONE : SSL_get_error(tls_->ssl, n);
      ERR_clear_error();
      if (n <= 0 && error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) return true;
      continue;
    }
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return true;
  }
  return false;
}

Connector PlaintextConnector() {
  return [](std::uint16_t port, const char* source) {
    return std::make_unique<RawPeer>(port, source);
  };
}

Connector TlsConnector(AttackerCert cert) {
  return [cert = std::move(cert)](std::uint16_t port, const char* source) {
    return std::make_unique<RawPeer>(port, source, &cert);
  };
}

// --- frames ---

std::string BigEndian(std::uint64_t v, int bytes) {
  std::string out;
  PutBigEndian(&out, v, bytes);
  return out;
}

std::string Framed(const std::string& payload) { return BigEndian(payload.size(), 4) + payload; }

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

std::string ForwardFrame(std::uint64_t id, const v1::InternalRequest& request) {
  raftpb::Frame frame;
  frame.mutable_forward_request()->set_id(id);
  request.SerializeToString(frame.mutable_forward_request()->mutable_request());
  return Framed(frame.SerializeAsString());
}

std::string ForwardedPut(std::uint64_t id, const std::string& key) {
  v1::InternalRequest put;
  put.mutable_put()->set_key(key);
  put.mutable_put()->set_value("x");
  return ForwardFrame(id, put);
}

std::string ForgedMemberUrls(std::uint64_t id, std::uint64_t member, const std::string& url) {
  v1::InternalRequest publish;
  publish.mutable_member_attributes()->set_id(member);
  publish.mutable_member_attributes()->set_name("n-forged");
  publish.mutable_member_attributes()->add_client_urls(url);
  return ForwardFrame(id, publish);
}

std::string ForwardAnswer(std::uint64_t id) {
  raftpb::Frame answer;
  answer.mutable_forward_response()->set_id(id);
  return Framed(answer.SerializeAsString());
}

std::string SnapshotChunk(std::uint64_t from, std::uint64_t to, std::uint64_t term,
                          std::uint64_t voter) {
  raftpb::Frame frame;
  raftpb::Message* m = frame.mutable_message();
  m->set_type(raftpb::INSTALL_SNAPSHOT);
  m->set_from(from);
  m->set_to(to);
  m->set_term(term);
  raftpb::SnapshotChunk* c = m->mutable_snapshot();
  c->set_transfer_id(7);
  c->mutable_meta()->set_index(1'000'000);
  c->mutable_meta()->set_term(term);
  c->mutable_meta()->mutable_conf()->add_voters(voter);
  c->set_file(".epoch-manifest");
  c->set_data("");
  c->set_last(true);
  c->set_total_bytes(1);
  return Framed(frame.SerializeAsString());
}

// --- counters ---

namespace {

std::uint64_t Sample(const TestCluster& cluster, int i, const std::string& family,
                     const std::string& reason) {
  auto page = cluster.Http(i, "/metrics");
  if (!page.ok()) return 0;
  const std::string prefix = fmt::format("{}{{reason=\"{}\"}} ", family, reason);
  const auto at = page->body.find(prefix);
  if (at == std::string::npos) return 0;
  return std::stoull(page->body.substr(at + prefix.size()));
}

}  // namespace

std::uint64_t FramesDropped(const TestCluster& cluster, int i, const std::string& reason) {
  return Sample(cluster, i, "epoch_peer_frames_dropped_total", reason);
}

std::uint64_t ConnectionsRefused(const TestCluster& cluster, int i, const std::string& reason) {
  return Sample(cluster, i, "epoch_peer_connections_refused_total", reason);
}

std::uint64_t AllFramesDropped(const TestCluster& cluster, int i) {
  auto page = cluster.Http(i, "/metrics");
  REQUIRE(page.ok());
  std::uint64_t sum = 0;
  std::istringstream lines(page->body);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("epoch_peer_frames_dropped_total{", 0) != 0) continue;
    sum += std::stoull(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

bool WaitCount(const std::function<std::uint64_t()>& count, std::uint64_t at_least) {
  return Eventually([&] { return count() >= at_least; }, 10s, 20ms);
}

// --- the cluster ---

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

std::vector<std::string> HostileFlags() {
  // Elections after 1 s without a leader (not the fast tests' 150 ms): the tests check that the
  // leader is kept, so only an attack may unseat it, never a loaded machine's scheduling stall.
  // The attacks do not wait for timeouts (a term or TimeoutNow acts at once).
  std::vector<std::string> flags = {
      "--tick-ms", "10", "--heartbeat-ticks", "5", "--election-timeout-ticks", "100"};
  flags.insert(flags.end(),
               {"--peer-frame-timeout-ms", "1000", "--peer-max-connections-per-address", "16"});
  return flags;
}

ClusterPtr StartHostileCluster(const Pki* pki) {
  if (pki == nullptr) return StartCluster(3, HostileFlags());
  test::ClusterOptions options;
  options.epochd_path = EPOCHD_PATH;
  options.extra_flags = HostileFlags();
  options.node_flags = [pki](int index, const std::vector<test::NodeInfo>& nodes) {
    return pki->PeerFlags(nodes.at(index).name);
  };
  auto started = TestCluster::Start(options);
  INFO("starting the cluster: " << started.status().ToString());
  REQUIRE(started.ok());
  return ClusterPtr(started->release());
}

// --- concurrent clients ---

struct ConcurrentClients::Load {
  explicit Load(chaos::RegisterOptions options) : workload(std::move(options)) {}
  chaos::RegisterWorkload workload;  // stops its clients when destroyed
};

ConcurrentClients::ConcurrentClients(const TestCluster& cluster) {
  chaos::RegisterOptions options;
  for (int i = 0; i < cluster.size(); ++i) {
    options.endpoints.push_back(cluster.node(i).client_address());
  }
  options.clients = 4;
  options.keys = 16;
  options.prefix = "/hostile/";
  options.op_timeout = 2s;
  options.pace = 5ms;
  load_ = std::make_unique<Load>(std::move(options));
  load_->workload.Start();
  RequireProgress(20);
}

ConcurrentClients::~ConcurrentClients() = default;

void ConcurrentClients::RequireProgress(std::uint64_t more) {
  const std::uint64_t target = load_->workload.completed() + more;
  INFO("client operations completed: " << load_->workload.completed() << ", waiting for "
                                       << target);
  REQUIRE(Eventually([&] { return load_->workload.completed() >= target; }, 20s, 20ms));
}

void ConcurrentClients::Finish() {
  RequireProgress(20);
  load_->workload.Stop();
  const chaos::RegisterReport report = load_->workload.Check(60s);
  INFO("ok " << report.ok << ", unknown " << report.unknown << ", failed reads " << report.read_fail
             << ", verdict " << lincheck::VerdictName(report.lin.verdict) << ": "
             << report.lin.description);
  CHECK(report.ok > 0);
  CHECK(report.lin.verdict == lincheck::Verdict::kOk);
  CHECK(report.serializable_violation.empty());
}

// --- attacks ---

namespace {

// A counter of node i, and the value it must reach: `more` above its value now.
struct Expect {
  std::function<std::uint64_t()> count;
  std::uint64_t target;
};

Expect Dropped(const TestCluster& cluster, int i, const std::string& reason, std::uint64_t more) {
  auto count = [&cluster, i, reason] { return FramesDropped(cluster, i, reason); };
  return {count, count() + more};
}

Expect Refused(const TestCluster& cluster, int i, const std::string& reason, std::uint64_t more) {
  auto count = [&cluster, i, reason] { return ConnectionsRefused(cluster, i, reason); };
  return {count, count() + more};
}

void CheckReached(const Expect& e, const std::string& what) {
  INFO(what);
  CHECK(WaitCount(e.count, e.target));
}

}  // namespace

void TermOverflow(TestCluster& cluster, const Victim& v, const Connector& connect) {
  const std::uint64_t self = cluster.node(v.follower).member_id;
  const std::uint64_t claimed = cluster.node(v.other).member_id;
  const Expect malformed = Dropped(cluster, v.follower, "malformed", 3);
  auto peer = connect(cluster.node(v.follower).peer_port, "127.0.0.1");
  REQUIRE(peer->connected());
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  REQUIRE(peer->Send(Hello(v.cluster_id, claimed) +
                     MessageFrame(raftpb::REQUEST_VOTE, claimed, self, max) +
                     MessageFrame(raftpb::HEARTBEAT, claimed, self, max) +
                     MessageFrame(raftpb::APPEND_ENTRIES, claimed, self, std::uint64_t{1} << 62)));
  CheckReached(malformed, "malformed");
  RequireUnharmed(cluster, v, "probe/term");
}

void ForgedTimeoutNow(TestCluster& cluster, const Victim& v, const Connector& connect) {
  const std::uint64_t self = cluster.node(v.follower).member_id;
  const std::uint64_t follower = cluster.node(v.other).member_id;
  const std::uint64_t leader = cluster.node(v.leader).member_id;
  const Expect not_leader = Dropped(cluster, v.follower, "timeout_now_not_leader", 2);
  const Expect mismatch = Dropped(cluster, v.follower, "sender_mismatch", 1);
  auto peer = connect(cluster.node(v.follower).peer_port, "127.0.0.1");
  REQUIRE(peer->Send(Hello(v.cluster_id, follower)));
  // From a follower, in the current term and the next one.
  REQUIRE(peer->Send(MessageFrame(raftpb::TIMEOUT_NOW, follower, self, v.term)));
  REQUIRE(peer->Send(MessageFrame(raftpb::TIMEOUT_NOW, follower, self, v.term + 1)));
  CheckReached(not_leader, "timeout_now_not_leader");
  // "From the leader" on the follower's connection: the sender is the connection's member.
  REQUIRE(peer->Send(MessageFrame(raftpb::TIMEOUT_NOW, leader, self, v.term)));
  CheckReached(mismatch, "sender_mismatch");
  RequireUnharmed(cluster, v, "probe/timeout-now");
}

void ForgedForwards(TestCluster& cluster, const Victim& v, const Connector& connect) {
  const std::uint64_t follower = cluster.node(v.other).member_id;
  const std::uint64_t leader_id = cluster.node(v.leader).member_id;
  const std::string members_before = EtcdctlOk(cluster, {"member", "list"});
  const Expect not_member = Refused(cluster, v.leader, "not_member", 1);
  const Expect forged = Dropped(cluster, v.leader, "forward_forged", 1);
  const Expect unknown = Dropped(cluster, v.leader, "forward_unknown", 1);

  // A stranger's hello: not a member, refused before any frame is read.
  auto stranger = connect(cluster.node(v.leader).peer_port, "127.0.0.1");
  REQUIRE(stranger->Send(Hello(v.cluster_id, 0x5eed) + ForwardedPut(1, "forged/stranger")));
  CHECK(stranger->ClosedWithin(5s));
  CheckReached(not_member, "not_member");

  // A follower publishing client URLs for the leader.
  auto peer = connect(cluster.node(v.leader).peer_port, "127.0.0.1");
  REQUIRE(peer->Send(Hello(v.cluster_id, follower) +
                     ForgedMemberUrls(2, leader_id, "http://10.66.66.66:2379")));
  CheckReached(forged, "forward_forged");

  // An answer to a forward nobody sent.
  REQUIRE(peer->Send(ForwardAnswer(12345)));
  CheckReached(unknown, "forward_unknown");

  RequireUnharmed(cluster, v, "probe/forward");
  CHECK(MustRange(cluster, v.leader, "forged/stranger").kvs_size() == 0);
  const std::string members_after = EtcdctlOk(cluster, {"member", "list"});
  CHECK(members_after == members_before);
  CHECK(members_after.find("10.66.66.66") == std::string::npos);
}

void ForgedSnapshotChunk(TestCluster& cluster, const Victim& v, const Connector& connect) {
  const std::uint64_t self = cluster.node(v.follower).member_id;
  const std::uint64_t follower = cluster.node(v.other).member_id;
  const std::uint64_t leader = cluster.node(v.leader).member_id;
  const Expect not_leader = Dropped(cluster, v.follower, "snapshot_not_leader", 1);
  const Expect mismatch = Dropped(cluster, v.follower, "sender_mismatch", 1);
  auto peer = connect(cluster.node(v.follower).peer_port, "127.0.0.1");
  REQUIRE(
      peer->Send(Hello(v.cluster_id, follower) + SnapshotChunk(follower, self, v.term, follower)));
  CheckReached(not_leader, "snapshot_not_leader");
  // A chunk "from the leader" on the follower's connection.
  REQUIRE(peer->Send(SnapshotChunk(leader, self, v.term, follower)));
  CheckReached(mismatch, "sender_mismatch");
  RequireUnharmed(cluster, v, "probe/snapshot");
  auto status = cluster.NodeStatus(v.follower);
  REQUIRE(status.ok());
  CHECK(status->raftindex() < 1'000'000);
}

void FrameFromAnotherMember(TestCluster& cluster, const Victim& v, const Connector& connect) {
  const std::uint64_t self = cluster.node(v.follower).member_id;
  const std::uint64_t follower = cluster.node(v.other).member_id;
  const std::uint64_t leader = cluster.node(v.leader).member_id;
  const Expect mismatch = Dropped(cluster, v.follower, "sender_mismatch", 1);
  const Expect recipient = Dropped(cluster, v.follower, "wrong_recipient", 1);
  auto peer = connect(cluster.node(v.follower).peer_port, "127.0.0.1");
  // A heartbeat in the next term "from the leader" would make the follower adopt that term.
  REQUIRE(peer->Send(Hello(v.cluster_id, follower) +
                     MessageFrame(raftpb::HEARTBEAT, leader, self, v.term + 1)));
  // A message for the leader sent to the follower.
  REQUIRE(peer->Send(MessageFrame(raftpb::HEARTBEAT, follower, leader, v.term)));
  CheckReached(mismatch, "sender_mismatch");
  CheckReached(recipient, "wrong_recipient");
  RequireUnharmed(cluster, v, "probe/mismatch");
}

void HalfSentFrame(TestCluster& cluster, const Victim& v, const Connector& connect) {
  const std::uint64_t follower = cluster.node(v.other).member_id;
  const Expect timeout = Dropped(cluster, v.follower, "partial_frame_timeout", 1);
  const Expect too_large = Dropped(cluster, v.follower, "frame_too_large", 1);
  auto peer = connect(cluster.node(v.follower).peer_port, "127.0.0.1");
  REQUIRE(peer->Send(Hello(v.cluster_id, follower) + BigEndian(64U << 20, 4) +
                     std::string(1 << 20, 'x')));
  // --peer-frame-timeout-ms 1000: closed between 0.5 and 1 s after the first bytes (bounded
  // wait far above that).
  CHECK(peer->ClosedWithin(10s));
  CheckReached(timeout, "partial_frame_timeout");
  // Over the frame-size limit: closed on the length prefix.
  auto huge = connect(cluster.node(v.follower).peer_port, "127.0.0.1");
  REQUIRE(huge->Send(Hello(v.cluster_id, follower) + BigEndian((64U << 20) + 1, 4)));
  CHECK(huge->ClosedWithin(5s));
  CheckReached(too_large, "frame_too_large");
  RequireUnharmed(cluster, v, "probe/half-frame");
}

void IdleConnections(TestCluster& cluster, const Victim& v) {
  rlimit files{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &files) == 0);
  if (files.rlim_cur < 1200 && files.rlim_max >= 1200) {
    files.rlim_cur = 1200;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &files) == 0);
  }
  REQUIRE(files.rlim_cur >= 1200);
  const Expect per_address = Refused(cluster, v.leader, "per_address_limit", 1000 - 16);
  const Expect hello_timeout = Refused(cluster, v.leader, "hello_timeout", 16);
  // Idle: TCP only, whatever the port speaks (an attacker that never starts the handshake).
  std::vector<std::unique_ptr<RawPeer>> idle;
  const Connector tcp = PlaintextConnector();
  // From an address no member uses (127.0.0.9), so the per-address cap is the attacker's alone.
  for (int i = 0; i < 1000; ++i) idle.push_back(tcp(cluster.node(v.leader).peer_port, "127.0.0.9"));
  // --peer-max-connections-per-address 16: the rest are closed as soon as accepted.
  CheckReached(per_address, "per_address_limit");
  RequireUnharmed(cluster, v, "probe/idle");
  // The 16 admitted ones sent no hello: closed after the hello timeout (5 s).
  CheckReached(hello_timeout, "hello_timeout");
  idle.clear();
  RequireUnharmed(cluster, v, "probe/idle-after");
}

void EveryAttack(TestCluster& cluster, const Victim& v, const Connector& connect) {
  TermOverflow(cluster, v, connect);
  ForgedTimeoutNow(cluster, v, connect);
  ForgedForwards(cluster, v, connect);
  ForgedSnapshotChunk(cluster, v, connect);
  FrameFromAnotherMember(cluster, v, connect);
  HalfSentFrame(cluster, v, connect);
  IdleConnections(cluster, v);
}

void RefusedBeforeAnyFrame(TestCluster& cluster, const Victim& v, const Connector& connect,
                           const std::string& refusal) {
  const std::uint64_t self = cluster.node(v.follower).member_id;
  const std::uint64_t claimed = cluster.node(v.other).member_id;
  const std::uint64_t leader = cluster.node(v.leader).member_id;
  const std::uint64_t frames_before = AllFramesDropped(cluster, v.follower);
  const Expect refused = Refused(cluster, v.follower, refusal, 1);
  auto peer = connect(cluster.node(v.follower).peer_port, "127.0.0.1");
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  // Written until the node closes the connection (the writes may fail then).
  (void)peer->Send(
      Hello(v.cluster_id, claimed) + MessageFrame(raftpb::REQUEST_VOTE, claimed, self, max) +
      MessageFrame(raftpb::TIMEOUT_NOW, leader, self, v.term) +
      MessageFrame(raftpb::HEARTBEAT, leader, self, v.term + 1) +
      ForwardedPut(1, "forged/refused") + ForgedMemberUrls(2, leader, "http://10.66.66.66:2379") +
      SnapshotChunk(leader, self, v.term, claimed) + BigEndian(64U << 20, 4) +
      std::string(1 << 16, 'x'));
  CHECK(peer->ClosedWithin(10s));
  CheckReached(refused, refusal);
  CHECK(AllFramesDropped(cluster, v.follower) == frames_before);
  RequireUnharmed(cluster, v, "probe/refused");
  CHECK(MustRange(cluster, v.leader, "forged/refused").kvs_size() == 0);
  auto status = cluster.NodeStatus(v.follower);
  REQUIRE(status.ok());
  CHECK(status->raftindex() < 1'000'000);
}

}  // namespace epoch::integration::hostile
