#include "epoch/test_support/test_cluster.h"

#include <fmt/format.h>
#include <grpcpp/security/tls_certificate_verifier.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "epoch/node/node_config.h"
#include "epoch/test_support/eventually.h"
#include "epoch/test_support/files.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::test {
namespace {

bool KeepRequestedByEnv() {
  const char* keep = std::getenv("EPOCH_TEST_KEEP");
  return keep != nullptr && std::string_view(keep) == "1";
}

}  // namespace

std::shared_ptr<grpc::ChannelCredentials> TestCluster::ClientCredentials() const {
  if (!options_.tls) return grpc::InsecureChannelCredentials();
  if (options_.tls->ca_file.empty()) {  // --auto-tls: self-signed, not verified
    grpc::experimental::TlsChannelCredentialsOptions skip;
    skip.set_verify_server_certs(false);
    skip.set_certificate_verifier(std::make_shared<grpc::experimental::NoOpCertificateVerifier>());
    skip.set_check_call_host(false);
    return grpc::experimental::TlsCredentials(skip);
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = test_support::ReadFile(options_.tls->ca_file);
  if (!options_.tls->client_cert_file.empty()) {
    ssl.pem_cert_chain = test_support::ReadFile(options_.tls->client_cert_file);
    ssl.pem_private_key = test_support::ReadFile(options_.tls->client_key_file);
  }
  return grpc::SslCredentials(ssl);
}

std::string NodeInfo::client_address() const { return fmt::format("127.0.0.1:{}", client_port); }

CommandResult RunEtcdctl(const std::string& endpoints, const std::vector<std::string>& args,
                         std::string_view stdin_data, std::chrono::milliseconds timeout) {
  std::vector<std::string> argv = {kEtcdctlPath, "--endpoints=" + endpoints};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, stdin_data, timeout, {"ETCDCTL_API=3"});
}

TestCluster::TestCluster(ClusterOptions options, PortBlock ports)
    : options_(std::move(options)),
      ports_(std::move(ports)),
      dir_("epoch-cluster"),
      initial_members_(options_.initial_members > 0 ? options_.initial_members : options_.nodes) {
  nodes_.resize(static_cast<std::size_t>(options_.nodes));
  channels_.resize(nodes_.size());
  for (int i = 0; i < size(); ++i) {
    NodeInfo& info = nodes_[static_cast<std::size_t>(i)].info;
    info.name = fmt::format("n{}", i + 1);
    info.member_id = server::MemberIdFor(options_.cluster_token, info.name).value();
    info.client_port = ports_.port(3 * i);
    info.peer_port = ports_.port(3 * i + 1);
    info.metrics_port = ports_.port(3 * i + 2);
    info.data_dir = dir_.Sub(info.name);
    info.log_path = dir_.Sub(info.name + ".log");
    if (i < initial_members_) initial_infos_.push_back(info);
  }
}

Result<std::unique_ptr<TestCluster>> TestCluster::Start(ClusterOptions options) {
  if (options.nodes < 1 || 3 * options.nodes > PortBlock::kPorts) {
    return Status::InvalidArgument(fmt::format("nodes must be in [1, 5], got {}", options.nodes));
  }
  if (options.initial_members < 0 || options.initial_members > options.nodes) {
    return Status::InvalidArgument(fmt::format("initial_members must be in [0, nodes = {}], got {}",
                                               options.nodes, options.initial_members));
  }
  if (access(options.epochd_path.c_str(), X_OK) != 0) {
    return Status::InvalidArgument(fmt::format("no epochd at '{}'", options.epochd_path));
  }
  Result<PortBlock> ports = PortBlock::Reserve();
  if (!ports.ok()) return ports.status();
  std::chrono::milliseconds start_timeout = options.start_timeout;
  std::unique_ptr<TestCluster> cluster;
  try {
    cluster.reset(new TestCluster(std::move(options), std::move(*ports)));
  } catch (const std::runtime_error& e) {  // the directory could not be created
    return Status::IOError(e.what());
  }
  for (int i = 0; i < cluster->initial_members(); ++i) {
    Status s = cluster->StartNode(i);
    if (!s.ok()) {
      cluster->KeepFiles();
      return s;
    }
  }
  Result<int> leader = cluster->WaitHealthy(start_timeout);
  if (!leader.ok()) {
    cluster->KeepFiles();
    return leader.status().Annotate(
        fmt::format("cluster in {} never became healthy", cluster->dir()));
  }
  return cluster;
}

TestCluster::~TestCluster() {
  for (Node& n : nodes_) n.process.KillAndReap();
  if (keep_files_ || std::uncaught_exceptions() > 0 || KeepRequestedByEnv()) {
    dir_.Keep();
    std::fprintf(stderr, "TestCluster: data and logs kept in %s\n", dir_.path().c_str());
  }
}

int TestCluster::IndexOf(std::uint64_t member_id) const {
  for (int i = 0; i < size(); ++i) {
    if (node(i).member_id == member_id) return i;
  }
  return -1;
}

std::string TestCluster::Endpoints() const {
  std::vector<int> all;
  for (int i = 0; i < size(); ++i) all.push_back(i);
  return Endpoints(all);
}

std::string TestCluster::Endpoints(const std::vector<int>& indexes) const {
  std::string out;
  for (int i : indexes) out += (out.empty() ? "" : ",") + node(i).client_address();
  return out;
}

void TestCluster::EtcdStyle(int i, std::vector<std::string>* args) const {
  const NodeInfo& self = node(i);
  std::string peers;
  for (const NodeInfo& n : initial_infos_) {
    peers += fmt::format("{}{}=http://127.0.0.1:{}", peers.empty() ? "" : ",", n.name, n.peer_port);
  }
  const std::string client = fmt::format("http://127.0.0.1:{}", self.client_port);
  const std::string peer = fmt::format("http://127.0.0.1:{}", self.peer_port);
  auto set = [args](const std::string& flag, const std::string& value) {
    auto it = std::find(args->begin(), args->end(), flag);
    if (it != args->end()) {
      *(it + 1) = value;
    } else {
      args->insert(args->end(), {flag, value});
    }
  };
  auto drop = [args](const std::string& flag) {
    auto it = std::find(args->begin(), args->end(), flag);
    if (it != args->end()) args->erase(it, it + 2);
  };
  drop("--initial-cluster-clients");
  set("--initial-cluster", peers);
  set("--listen-client-urls", fmt::format("{},http://127.0.0.2:{}", client, self.client_port));
  set("--listen-peer-urls", peer);
  set("--advertise-client-urls", client);
  set("--initial-advertise-peer-urls", peer);
  set("--initial-cluster-state", "new");
}

void TestCluster::TlsStyle(std::vector<std::string>* args) const {
  const ClusterTls& tls = *options_.tls;
  for (std::size_t a = 0; a + 1 < args->size(); ++a) {
    if ((*args)[a] != "--listen-client-urls") continue;
    std::string urls;
    std::stringstream in((*args)[a + 1]);
    for (std::string url; std::getline(in, url, ',');) {
      if (url.starts_with("http://")) url.erase(0, 7);
      urls += (urls.empty() ? "https://" : ",https://") + url;
    }
    (*args)[a + 1] = urls;
  }
  for (std::size_t a = 0; a + 1 < args->size(); ++a) {
    if ((*args)[a] == "--advertise-client-urls") {
      std::string& url = (*args)[a + 1];
      if (url.starts_with("http://")) url = "https://" + url.substr(7);
    }
  }
  if (tls.cert_file.empty()) {
    args->push_back("--auto-tls");
  } else {
    args->insert(args->end(), {"--cert-file", tls.cert_file, "--key-file", tls.key_file});
  }
  if (!tls.ca_file.empty()) args->insert(args->end(), {"--trusted-ca-file", tls.ca_file});
  if (tls.client_cert_auth) args->push_back("--client-cert-auth");
}

std::vector<std::string> TestCluster::EtcdctlTlsFlags() const {
  if (!options_.tls) return {};
  if (options_.tls->ca_file.empty())
    return {"--insecure-transport=false", "--insecure-skip-tls-verify"};
  std::vector<std::string> flags = {"--cacert=" + options_.tls->ca_file};
  if (!options_.tls->client_cert_file.empty()) {
    flags.push_back("--cert=" + options_.tls->client_cert_file);
    flags.push_back("--key=" + options_.tls->client_key_file);
  }
  return flags;
}

std::vector<std::string> TestCluster::JoinedArgs(const NodeInfo& self) const {
  // etcd's flags, as etcdctl member add's output is meant to be used; no --initial-cluster-clients:
  // the others' client URLs come from their publications.
  const std::string client = "http://" + self.client_address();
  return {options_.epochd_path,
          "--name",
          self.name,
          "--data-dir",
          self.data_dir,
          "--listen-client-urls",
          self.client_address(),
          "--advertise-client-urls",
          client,
          "--listen-peer-urls",
          fmt::format("127.0.0.1:{}", self.peer_port),
          "--initial-advertise-peer-urls",
          self.joined->advertised_peer,
          "--listen-metrics-urls",
          fmt::format("127.0.0.1:{}", self.metrics_port),
          "--initial-cluster",
          self.joined->initial_cluster,
          "--initial-cluster-state",
          "existing",
          "--initial-cluster-token",
          options_.cluster_token};
}

std::vector<std::string> TestCluster::ArgsFor(int i) const {
  std::string peers, clients;
  for (const NodeInfo& n : initial_infos_) {
    peers += fmt::format("{}{}=127.0.0.1:{}", peers.empty() ? "" : ",", n.name, n.peer_port);
    clients += fmt::format("{}{}=127.0.0.1:{}", clients.empty() ? "" : ",", n.name, n.client_port);
  }
  const NodeInfo& self = node(i);
  std::vector<std::string> args = {
      options_.epochd_path,
      "--name",
      self.name,
      "--data-dir",
      self.data_dir,
      "--listen-client-urls",
      self.client_address(),
      "--listen-peer-urls",
      fmt::format("127.0.0.1:{}", self.peer_port),
      "--listen-metrics-urls",
      fmt::format("127.0.0.1:{}", self.metrics_port),
      "--initial-cluster",
      peers,
      "--initial-cluster-clients",
      clients,
      "--initial-cluster-token",
      options_.cluster_token,
  };
  if (self.joined) args = JoinedArgs(self);
  if (options_.etcd_flags && !self.joined) EtcdStyle(i, &args);
  if (options_.tls) TlsStyle(&args);
  args.insert(args.end(), options_.extra_flags.begin(), options_.extra_flags.end());
  if (options_.node_flags) {
    std::vector<NodeInfo> infos;
    for (const Node& n : nodes_) infos.push_back(n.info);
    std::vector<std::string> more = options_.node_flags(i, infos);
    args.insert(args.end(), more.begin(), more.end());
  }
  return options_.yaml_config && !self.joined ? AsYamlConfig(i, args) : args;
}

std::vector<std::string> TestCluster::AsYamlConfig(int i,
                                                   const std::vector<std::string>& args) const {
  auto quoted = [](const std::string& v) {
    std::string out = "\"";
    for (char c : v) out += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    return out + "\"";
  };
  std::ostringstream yaml;
  for (std::size_t a = 1; a < args.size(); ++a) {
    const std::string key = args[a].substr(2);
    const bool has_value = a + 1 < args.size() && args[a + 1].rfind("--", 0) != 0;
    yaml << key << ": " << (has_value ? quoted(args[++a]) : "true") << "\n";
  }
  const std::string path = node(i).data_dir + ".yml";
  std::ofstream(path) << yaml.str();
  return {args.front(), "--config-file", path};
}

Status TestCluster::StartNode(int i) {
  Node& n = nodes_.at(static_cast<std::size_t>(i));
  if (n.process.Running()) {
    return Status::FailedPrecondition(fmt::format("{} is already running", n.info.name));
  }
  {
    std::ofstream log(n.info.log_path, std::ios::app);
    log << "==== TestCluster: starting " << n.info.name << " ====\n";
  }
  Result<ChildProcess> child = ChildProcess::Spawn(ArgsFor(i), n.info.log_path);
  if (!child.ok()) return child.status().Annotate(fmt::format("start {}", n.info.name));
  n.process = std::move(*child);
  n.started = true;
  n.paused = false;
  n.exit_status.reset();
  return Status::Ok();
}

Status TestCluster::JoinNode(int i, JoiningMember member) {
  Node& n = nodes_.at(static_cast<std::size_t>(i));
  if (n.process.Running()) {
    return Status::FailedPrecondition(
        fmt::format("slot {} still runs {}: it cannot take {}", i, n.info.name, member.name));
  }
  n.info.name = member.name;
  n.info.member_id = member.member_id;
  n.info.data_dir = dir_.Sub(member.name);
  n.info.log_path = dir_.Sub(member.name + ".log");
  n.info.joined = std::move(member);
  n.exit_status.reset();
  return StartNode(i);
}

Result<int> TestCluster::AwaitExit(int i, std::chrono::milliseconds timeout) {
  Node& n = nodes_.at(static_cast<std::size_t>(i));
  if (n.paused) Resume(i);
  if (!n.process.Running()) {  // already gone (or never started)
    n.started = false;
    if (!n.exit_status) n.exit_status = n.process.exit_status();
    return n.exit_status.value_or(-1);
  }
  std::optional<int> status = n.process.WaitExit(timeout);
  if (!status) {
    return Status::Timeout(fmt::format("{} still runs {} ms later", n.info.name, timeout.count()));
  }
  n.exit_status = status;
  n.started = false;
  return *status;
}

void TestCluster::Kill(int i) {
  Node& n = nodes_.at(static_cast<std::size_t>(i));
  n.process.KillAndReap();
  n.exit_status = n.process.exit_status();
  n.started = false;
  n.paused = false;
}

void TestCluster::SendKill(int i) {
  Node& n = nodes_.at(static_cast<std::size_t>(i));
  if (!n.process.Running()) return;
  n.process.Signal(SIGCONT);  // a paused process dies at once too
  n.process.Signal(SIGKILL);
}

Status TestCluster::Stop(int i, std::chrono::milliseconds timeout) {
  Node& n = nodes_.at(static_cast<std::size_t>(i));
  n.started = false;
  if (!n.process.Running()) {
    n.exit_status = n.process.exit_status();
    return Status::Ok();
  }
  if (n.paused) Resume(i);
  n.process.Signal(SIGTERM);
  std::optional<int> status = n.process.WaitExit(timeout);
  if (!status) {
    Kill(i);
    return Status::Timeout(
        fmt::format("{} did not exit within {} ms of SIGTERM", n.info.name, timeout.count()));
  }
  n.exit_status = status;
  if (*status != 0) {
    return Status::Aborted(fmt::format("{} exited with status {} after SIGTERM: {}", n.info.name,
                                       *status, LogTail(i, 2048)));
  }
  return Status::Ok();
}

void TestCluster::Pause(int i) {
  Node& n = nodes_.at(static_cast<std::size_t>(i));
  n.process.Signal(SIGSTOP);
  n.paused = true;
}

void TestCluster::Resume(int i) {
  Node& n = nodes_.at(static_cast<std::size_t>(i));
  n.process.Signal(SIGCONT);
  n.paused = false;
}

bool TestCluster::IsRunning(int i) {
  Node& n = nodes_.at(static_cast<std::size_t>(i));
  bool running = n.process.Running();
  if (!running && !n.exit_status) n.exit_status = n.process.exit_status();
  return running;
}

Status TestCluster::CheckAlive() {
  for (int i = 0; i < size(); ++i) {
    const bool expected =
        std::find(options_.may_exit.begin(), options_.may_exit.end(), i) != options_.may_exit.end();
    if (nodes_[static_cast<std::size_t>(i)].started && !expected && !IsRunning(i)) {
      return Status::Aborted(fmt::format("{} exited on its own (status {}): {}", node(i).name,
                                         ExitStatus(i).value_or(-1), LogTail(i, 2048)));
    }
  }
  return Status::Ok();
}

std::shared_ptr<grpc::Channel> TestCluster::Channel(int i) {
  std::lock_guard lock(channels_mu_);
  auto& channel = channels_.at(static_cast<std::size_t>(i));
  if (!channel) {
    grpc::ChannelArguments args;
    // Reconnect quickly after a node restarts (the default backoff grows to two minutes). As in
    // client/src/client.cc, GRPC_ARG_MIN_RECONNECT_BACKOFF_MS stays at its default: it is also
    // the connect-attempt timeout, and a short one aborts handshakes whose SETTINGS frame needs
    // a round trip (the client port classifies a connection by its first bytes before gRPC
    // answers) while no call is polling the channel.
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
    // Each channel its own connection, so tests can open distinct ones per node.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(16 << 20);
    args.SetMaxSendMessageSize(16 << 20);
    channel = grpc::CreateCustomChannel(node(i).client_address(), ClientCredentials(), args);
  }
  return channel;
}

Result<etcdserverpb::StatusResponse> TestCluster::NodeStatus(int i,
                                                             std::chrono::milliseconds timeout) {
  auto stub = etcdserverpb::Maintenance::NewStub(Channel(i));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
  etcdserverpb::StatusRequest request;
  etcdserverpb::StatusResponse response;
  grpc::Status s = stub->Status(&ctx, request, &response);
  if (!s.ok()) {
    return Status::Unavailable(fmt::format("Status on {}: {}", node(i).name, s.error_message()));
  }
  return response;
}

Result<HttpResponse> TestCluster::Http(int i, std::string_view path,
                                       std::chrono::milliseconds timeout) const {
  return HttpGet(node(i).metrics_port, path, timeout);
}

std::optional<double> TestCluster::Metric(int i, std::string_view name) const {
  Result<HttpResponse> r = Http(i, "/metrics");
  if (!r.ok() || r->code != 200) return std::nullopt;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > name.size() && line.starts_with(name) && line[name.size()] == ' ') {
      try {
        return std::stod(line.substr(name.size() + 1));
      } catch (const std::exception&) {
        return std::nullopt;  // not a number
      }
    }
  }
  return std::nullopt;
}

std::optional<int> TestCluster::AgreedLeader(std::optional<int> not_index) {
  std::set<std::uint64_t> leaders;
  for (int i = 0; i < size(); ++i) {
    if (not_index == i || IsPaused(i) || !IsRunning(i)) continue;
    Result<etcdserverpb::StatusResponse> st = NodeStatus(i, std::chrono::milliseconds(500));
    if (!st.ok() || st->leader() == 0) return std::nullopt;
    leaders.insert(st->leader());
  }
  if (leaders.size() != 1) return std::nullopt;
  int leader = IndexOf(*leaders.begin());
  if (leader < 0 || leader == not_index || IsPaused(leader) || !IsRunning(leader)) {
    return std::nullopt;
  }
  return leader;
}

Result<int> TestCluster::WaitForLeader(std::chrono::milliseconds timeout,
                                       std::optional<int> not_index) {
  std::optional<int> leader;
  auto agreed = [&] {
    leader = AgreedLeader(not_index);
    return leader.has_value();
  };
  if (test_support::Eventually(agreed, timeout, test_support::kProcessPoll)) return *leader;
  std::string seen;
  for (int i = 0; i < size(); ++i) {
    if (!IsRunning(i)) {
      seen += fmt::format(" {}=down", node(i).name);
      continue;
    }
    Result<etcdserverpb::StatusResponse> st = NodeStatus(i, std::chrono::milliseconds(500));
    seen += st.ok()
                ? fmt::format(" {}:leader={:x},term={}", node(i).name, st->leader(), st->raftterm())
                : fmt::format(" {}:{}", node(i).name, st.status().message());
  }
  return Status::Timeout(fmt::format("no agreed leader within {} ms;{}", timeout.count(), seen));
}

Result<int> TestCluster::WaitHealthy(std::chrono::milliseconds timeout) {
  std::string last;
  Status gone;  // a node that exited on its own: no point in waiting
  std::optional<int> leader;
  auto healthy = [&] {
    for (int i = 0; i < size(); ++i) {
      if (IsPaused(i)) continue;
      if (!IsRunning(i)) {
        gone = CheckAlive();  // OK when the test killed or stopped it
        if (!gone.ok()) return true;
        continue;
      }
      Result<HttpResponse> r = Http(i, "/ready", std::chrono::milliseconds(500));
      if (!r.ok() || r->code != 200) {
        last = fmt::format("{} /ready: {}", node(i).name,
                           r.ok() ? fmt::format("{} {}", r->code, r->body) : r.status().message());
        return false;
      }
    }
    leader = AgreedLeader(std::nullopt);
    if (!leader) last = "the live nodes do not agree on a leader";
    return leader.has_value();
  };
  const bool done = test_support::Eventually(healthy, timeout, test_support::kProcessPoll);
  if (!gone.ok()) return gone;
  if (done) return *leader;
  return Status::Timeout(fmt::format("not healthy within {} ms: {}", timeout.count(), last));
}

CommandResult TestCluster::Etcdctl(const std::vector<std::string>& args,
                                   std::string_view stdin_data,
                                   std::optional<std::string> endpoints,
                                   std::chrono::milliseconds timeout) const {
  std::vector<std::string> all = EtcdctlTlsFlags();
  all.insert(all.end(), args.begin(), args.end());
  return RunEtcdctl(endpoints ? *endpoints : Endpoints(), all, stdin_data, timeout);
}

std::string TestCluster::LogTail(int i, std::size_t bytes) const {
  return test_support::FileTail(node(i).log_path, bytes);
}

}  // namespace epoch::test
