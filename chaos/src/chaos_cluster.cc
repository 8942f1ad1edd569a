#include "epoch/chaos/chaos_cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <optional>

#include "epoch/test_support/eventually.h"
#include "epoch/test_support/test_pki.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::chaos {

Result<std::unique_ptr<ChaosCluster>> ChaosCluster::Start(ChaosClusterOptions options) {
  std::unique_ptr<ChaosCluster> cc(new ChaosCluster());
  auto net = ProxyNet::Start(options.nodes, options.seed);
  if (!net.ok()) return net.status();
  cc->net_ = std::move(*net);
  test::ClusterOptions topts;
  topts.epochd_path = options.epochd_path;
  topts.nodes = options.nodes;
  if (!options.raft_flags.empty()) topts.extra_flags = options.raft_flags;
  topts.extra_flags.push_back("--enable-failpoints");
  if (options.client_tls) topts.tls = test::ClusterTls{};  // --auto-tls
  if (options.peer_tls) {
    cc->pki_ = std::make_unique<test_support::TempDir>("epoch-chaos-pki");
    EPOCH_RETURN_IF_ERROR(test::MakeTestCa(cc->pki_->path(), "ca"));
    for (int i = 1; i <= options.nodes; ++i) {
      const std::string name = fmt::format("n{}", i);  // TestCluster's member names
      EPOCH_RETURN_IF_ERROR(test::IssueTestCertificate(cc->pki_->path(), name, name));
    }
  }
  ProxyNet* proxies = cc->net_.get();
  const std::string pki_dir = cc->pki_ ? cc->pki_->path() : std::string();
  topts.node_flags = [proxies, pki_dir](int self, const std::vector<test::NodeInfo>& infos) {
    std::string dial;
    for (int j = 0; j < static_cast<int>(infos.size()); ++j) {
      proxies->SetTarget(j, infos[static_cast<std::size_t>(j)].peer_port);
      if (j == self) continue;
      dial += fmt::format("{}{}=127.0.0.1:{}", dial.empty() ? "" : ",",
                          infos[static_cast<std::size_t>(j)].name, proxies->listen_port(self, j));
    }
    std::vector<std::string> flags = {"--peer-dial-override", dial};
    if (!pki_dir.empty()) {
      const auto tls = test::PeerTlsFlags(pki_dir, infos[static_cast<std::size_t>(self)].name);
      flags.insert(flags.end(), tls.begin(), tls.end());
    }
    return flags;
  };
  auto cluster = test::TestCluster::Start(std::move(topts));
  if (!cluster.ok()) return cluster.status();
  cc->cluster_ = std::move(*cluster);
  cc->client_tls_ = options.client_tls;
  return cc;
}

std::vector<std::string> ChaosCluster::ClientEndpoints() const {
  std::vector<std::string> out;
  const std::string scheme = client_tls_ ? "https://" : "";
  for (int i = 0; i < cluster_->size(); ++i) {
    out.push_back(scheme + cluster_->node(i).client_address());
  }
  return out;
}

Status ChaosCluster::Disk(int i, std::string_view query) {
  auto r = cluster_->Http(i, fmt::format("/failpoint/disk?{}", query));
  if (!r.ok()) return r.status();
  if (r->code != 200) {
    return Status::FailedPrecondition(
        fmt::format("n{} disk failpoint {}: {} {}", i + 1, query, r->code, r->body));
  }
  return Status::Ok();
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
