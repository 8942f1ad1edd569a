#include "epoch/chaos/chaos_cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <thread>

#include "epoch/test_support/eventually.h"
#include "epoch/test_support/test_pki.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::chaos {

Result<std::unique_ptr<ChaosCluster>> ChaosCluster::Start(ChaosClusterOptions options) {
  std::unique_ptr<ChaosCluster> cc(new ChaosCluster());
  auto net = ProxyNet::Start(options.nodes, options.seed);
  if (!net.ok()) return net.status();
  cc->net_ = std::move(*net);
  const int initial = options.initial_members > 0 ? options.initial_members : options.nodes;
  test::ClusterOptions topts;
  topts.epochd_path = options.epochd_path;
  topts.nodes = options.nodes;
  topts.initial_members = initial;
  if (!options.raft_flags.empty()) topts.extra_flags = options.raft_flags;
  topts.extra_flags.push_back("--enable-failpoints");
  if (options.snapshot_count > 0) {
    topts.extra_flags.insert(topts.extra_flags.end(),
                             {"--snapshot-count", std::to_string(options.snapshot_count)});
  }
  if (options.snapshot_catchup_entries > 0) {
    topts.extra_flags.insert(
        topts.extra_flags.end(),
        {"--snapshot-catchup-entries", std::to_string(options.snapshot_catchup_entries)});
  }
  if (options.client_tls) topts.tls = test::ClusterTls{};  // --auto-tls
  std::vector<std::string> initial_names;
  for (int i = 0; i < initial; ++i) {
    initial_names.push_back(fmt::format("n{}", i + 1));  // TestCluster's member names
    cc->slot_of_name_[initial_names.back()] = i;
  }
  cc->known_names_.assign(static_cast<std::size_t>(options.nodes), initial_names);
  cc->next_name_ = initial + 1;
  if (options.peer_tls) {
    cc->pki_ = std::make_unique<test_support::TempDir>("epoch-chaos-pki");
    EPOCH_RETURN_IF_ERROR(test::MakeTestCa(cc->pki_->path(), "ca"));
    for (const std::string& name : initial_names) {
      EPOCH_RETURN_IF_ERROR(test::IssueTestCertificate(cc->pki_->path(), name, name));
    }
  }
  ChaosCluster* self = cc.get();  // owns the TestCluster, so outlives every call
  topts.node_flags = [self](int i, const std::vector<test::NodeInfo>& infos) {
    return self->NodeFlags(i, infos);
  };
  auto cluster = test::TestCluster::Start(std::move(topts));
  if (!cluster.ok()) return cluster.status();
  cc->cluster_ = std::move(*cluster);
  cc->client_tls_ = options.client_tls;
  for (int i = 0; i < initial; ++i) cc->net_->SetMemberId(i, cc->cluster_->node(i).member_id);
  return cc;
}

std::vector<std::string> ChaosCluster::NodeFlags(int self,
                                                 const std::vector<test::NodeInfo>& infos) {
  std::string dial;
  for (int j = 0; j < static_cast<int>(infos.size()); ++j) {
    net_->SetTarget(j, infos[static_cast<std::size_t>(j)].peer_port);
  }
  // Every member this node was started knowing, at the proxy of the link to its slot (a name
  // whose member has left reaches whoever holds its slot now, and is dropped once the node
  // applies the configuration). Members added later are dialled at their entry URL.
  for (const std::string& name : known_names_.at(static_cast<std::size_t>(self))) {
    auto it = slot_of_name_.find(name);
    if (it == slot_of_name_.end() || it->second == self) continue;
    dial += fmt::format("{}{}=127.0.0.1:{}", dial.empty() ? "" : ",", name,
                        net_->listen_port(self, it->second));
  }
  std::vector<std::string> flags;
  if (!dial.empty()) flags = {"--peer-dial-override", dial};
  if (pki_) {
    const auto tls = test::PeerTlsFlags(pki_->path(), infos[static_cast<std::size_t>(self)].name);
    flags.insert(flags.end(), tls.begin(), tls.end());
  }
  return flags;
}

std::vector<std::string> ChaosCluster::ClientEndpoints() const {
  std::vector<std::string> out;
  const std::string scheme = client_tls_ ? "https://" : "";
  for (int i = 0; i < cluster_->size(); ++i) {
    out.push_back(scheme + cluster_->node(i).client_address());
  }
  return out;
}

namespace {

Status Failpoint(test::TestCluster& tc, int i, std::string_view which, std::string_view query) {
  auto r = tc.Http(i, fmt::format("/failpoint/{}?{}", which, query));
  if (!r.ok()) return r.status();
  if (r->code != 200) {
    return Status::FailedPrecondition(
        fmt::format("n{} {} failpoint {}: {} {}", i + 1, which, query, r->code, r->body));
  }
  return Status::Ok();
}

}  // namespace

Status ChaosCluster::Disk(int i, std::string_view query) {
  return Failpoint(*cluster_, i, "disk", query);
}

Status ChaosCluster::Clock(int i, std::string_view query) {
  return Failpoint(*cluster_, i, "clock", query);
}

Status ChaosCluster::MoveLeader(int from, int to) {
  auto stub = etcdserverpb::Maintenance::NewStub(cluster_->Channel(from));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  etcdserverpb::MoveLeaderRequest req;
  req.set_targetid(cluster_->node(to).member_id);
  etcdserverpb::MoveLeaderResponse resp;
  grpc::Status s = stub->MoveLeader(&ctx, req, &resp);
  if (!s.ok()) return Status::Unavailable(fmt::format("MoveLeader: {}", s.error_message()));
  return Status::Ok();
}

Status ChaosCluster::CheckConverged(std::chrono::milliseconds timeout, std::string* detail) {
  std::vector<int> running;
  for (int i = 0; i < size(); ++i) {
    if (cluster_->IsRunning(i) && !cluster_->IsPaused(i)) running.push_back(i);
  }
  std::int64_t revision = -1;
  std::string seen;
  auto one_revision = [&] {
    std::int64_t lo = INT64_MAX, hi = -1;
    seen.clear();
    for (int i : running) {
      auto s = cluster_->NodeStatus(i);
      std::int64_t r = s.ok() ? s->header().revision() : -1;
      seen += fmt::format(" n{}={}", i + 1, r);
      lo = std::min(lo, r);
      hi = std::max(hi, r);
    }
    if (lo == hi && lo > 0) revision = lo;
    return revision > 0;
  };
  test_support::Eventually(one_revision, timeout, std::chrono::milliseconds(50));
  if (revision < 0) {
    return Status::Aborted(fmt::format("members never reached one revision:{}", seen));
  }
  std::string hashes;
  std::optional<std::uint32_t> first;
  bool differ = false;
  for (int i : running) {
    auto stub = etcdserverpb::Maintenance::NewStub(cluster_->Channel(i));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    etcdserverpb::HashKVRequest req;
    req.set_revision(revision);
    etcdserverpb::HashKVResponse resp;
    grpc::Status s = stub->HashKV(&ctx, req, &resp);
    if (!s.ok()) return Status::Aborted(fmt::format("HashKV on n{}: {}", i + 1, s.error_message()));
    hashes += fmt::format(" n{}={:08x}", i + 1, resp.hash());
    if (first && *first != resp.hash()) differ = true;
    if (!first) first = resp.hash();
  }
  *detail = fmt::format("revision {} hashes{}", revision, hashes);
  if (differ) return Status::Aborted("state hashes differ at " + *detail);
  return Status::Ok();
}

std::uint64_t ChaosCluster::SumMetric(std::string_view name) {
  std::uint64_t sum = 0;
  for (int i = 0; i < size(); ++i) {
    if (!cluster_->IsRunning(i) || cluster_->IsPaused(i)) continue;
    sum += static_cast<std::uint64_t>(cluster_->Metric(i, name).value_or(0));
  }
  return sum;
}

}  // namespace epoch::chaos
