// ChaosCluster's runtime membership: remove a slot's member, add a fresh learner in an empty
// slot, promote it once caught up (chaos_cluster.h). Every change goes to the leader when one is
// known (any running member otherwise); a change whose answer was lost is settled by MemberList,
// never by reading an error's text.
#include <fmt/format.h>

#include <filesystem>
#include <thread>

#include "epoch/chaos/chaos_cluster.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::chaos {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

constexpr milliseconds kCallTimeout(5000);
constexpr milliseconds kRetryPause(100);

void SetDeadline(grpc::ClientContext& ctx, milliseconds timeout) {
  ctx.set_deadline(std::chrono::system_clock::now() + timeout);
}

const etcdserverpb::Member* FindMember(const etcdserverpb::MemberListResponse& list,
                                       std::uint64_t id) {
  for (const etcdserverpb::Member& m : list.members()) {
    if (m.id() == id) return &m;
  }
  return nullptr;
}

const etcdserverpb::Member* FindByPeerUrl(const etcdserverpb::MemberListResponse& list,
                                          const std::string& url) {
  for (const etcdserverpb::Member& m : list.members()) {
    for (const std::string& u : m.peerurls()) {
      if (u == url) return &m;
    }
  }
  return nullptr;
}

}  // namespace

std::vector<int> ChaosCluster::Reachable() {
  std::vector<int> out;
  for (int i = 0; i < size(); ++i) {
    if (cluster_->IsRunning(i) && !cluster_->IsPaused(i)) out.push_back(i);
  }
  for (int i : out) {
    auto st = cluster_->NodeStatus(i, milliseconds(500));
    if (!st.ok() || st->leader() == 0) continue;
    auto leader = std::find(out.begin(), out.end(), cluster_->IndexOf(st->leader()));
    if (leader != out.end()) std::rotate(out.begin(), leader, leader + 1);
    break;
  }
  return out;
}

Result<etcdserverpb::MemberListResponse> ChaosCluster::Members() {
  Status last = Status::Unavailable("no running member");
  for (int i : Reachable()) {
    auto stub = etcdserverpb::Cluster::NewStub(cluster_->Channel(i));
    grpc::ClientContext ctx;
    SetDeadline(ctx, milliseconds(2000));
    etcdserverpb::MemberListRequest req;
    req.set_linearizable(true);
    etcdserverpb::MemberListResponse resp;
    grpc::Status s = stub->MemberList(&ctx, req, &resp);
    if (s.ok()) return resp;
    last = Status::Unavailable(fmt::format("MemberList on n{}: {}", i + 1, s.error_message()));
  }
  return last;
}

std::optional<bool> ChaosCluster::Lists(std::uint64_t id) {
  auto list = Members();
  if (!list.ok()) return std::nullopt;
  return FindMember(*list, id) != nullptr;
}

Status ChaosCluster::RemoveMember(int slot, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::uint64_t id = cluster_->node(slot).member_id;
  const std::string name = cluster_->node(slot).name;
  std::string last = "no attempt";
  for (int attempt = 0; Clock::now() < deadline && attempt < 100; ++attempt) {
    for (int via : Reachable()) {
      auto stub = etcdserverpb::Cluster::NewStub(cluster_->Channel(via));
      grpc::ClientContext ctx;
      SetDeadline(ctx, kCallTimeout);
      etcdserverpb::MemberRemoveRequest req;
      req.set_id(id);
      etcdserverpb::MemberRemoveResponse resp;
      grpc::Status s = stub->MemberRemove(&ctx, req, &resp);
      last = s.ok() ? "ok" : fmt::format("via n{}: {}", via + 1, s.error_message());
      break;  // the answer, or its loss, is settled by MemberList below
    }
    if (Lists(id) == std::optional<bool>(false)) break;
    std::this_thread::sleep_for(kRetryPause);
  }
  if (Lists(id) != std::optional<bool>(false)) {
    return Status::Timeout(
        fmt::format("member {} ({:x}) still listed after MemberRemove: {}", name, id, last));
  }
  const auto left =
      std::max(milliseconds(0), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
  Result<int> exited = cluster_->AwaitExit(slot, std::max(left, milliseconds(10'000)));
  if (!exited.ok()) {
    cluster_->Kill(slot);
    return Status::Aborted(
        fmt::format("removed member {} did not exit: {}", name, exited.status().ToString()));
  }
  std::error_code ec;
  std::filesystem::remove_all(cluster_->node(slot).data_dir, ec);
  if (ec)
    return Status::IOError(
        fmt::format("wiping {}: {}", cluster_->node(slot).data_dir, ec.message()));
  return Status::Ok();
}

Result<std::string> ChaosCluster::AddLearner(int slot, milliseconds timeout) {
  if (pki_) {
    return Status::FailedPrecondition(
        "runtime membership with peer TLS: a proxy entry cannot attribute TLS connections");
  }
  if (cluster_->IsRunning(slot)) {
    return Status::FailedPrecondition(
        fmt::format("slot {} still runs {}", slot, cluster_->node(slot).name));
  }
  const auto deadline = Clock::now() + timeout;
  Result<std::uint16_t> entry = net_->AddEntry(slot);
  if (!entry.ok()) return entry.status();
  const std::string url = fmt::format("http://127.0.0.1:{}", *entry);
  const std::string name = fmt::format("n{}", next_name_++);
  std::optional<etcdserverpb::MemberListResponse> after;  // the members once it is added
  std::uint64_t id = 0;
  std::string last = "no attempt";
  for (int attempt = 0; Clock::now() < deadline && attempt < 100 && id == 0; ++attempt) {
    for (int via : Reachable()) {
      auto stub = etcdserverpb::Cluster::NewStub(cluster_->Channel(via));
      grpc::ClientContext ctx;
      SetDeadline(ctx, kCallTimeout);
      etcdserverpb::MemberAddRequest req;
      req.add_peerurls(url);
      req.set_islearner(true);
      etcdserverpb::MemberAddResponse resp;
      grpc::Status s = stub->MemberAdd(&ctx, req, &resp);
      last = s.ok() ? "ok" : fmt::format("via n{}: {}", via + 1, s.error_message());
      break;
    }
    // The answer may be lost after the change was applied: the URL is new, so the list says.
    if (auto list = Members(); list.ok()) {
      if (const etcdserverpb::Member* m = FindByPeerUrl(*list, url)) {
        id = m->id();
        after = *list;
      }
    }
    if (id == 0) std::this_thread::sleep_for(kRetryPause);
  }
  if (id == 0) return Status::Timeout(fmt::format("MemberAdd of {} at {}: {}", name, url, last));
  // --initial-cluster as etcdctl member add prints it: every member, the new one by its name.
  test::JoiningMember joining{name, id, "", url};
  std::vector<std::string> names;
  for (const etcdserverpb::Member& m : after->members()) {
    const std::string n = m.id() == id ? name : m.name();
    if (n.empty()) continue;  // an added member that never started: not dialled by name
    names.push_back(n);
    for (const std::string& u : m.peerurls()) {
      joining.initial_cluster +=
          fmt::format("{}{}={}", joining.initial_cluster.empty() ? "" : ",", n, u);
    }
  }
  slot_of_name_[name] = slot;
  known_names_.at(static_cast<std::size_t>(slot)) = names;
  net_->SetMemberId(slot, id);
  EPOCH_RETURN_IF_ERROR(cluster_->JoinNode(slot, std::move(joining)));
  return name;
}

Status ChaosCluster::PromoteWhenCaughtUp(int slot, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  const std::uint64_t id = cluster_->node(slot).member_id;
  std::string last = "no attempt";
  for (int attempt = 0; Clock::now() < deadline && attempt < 1000; ++attempt) {
    for (int via : Reachable()) {
      auto stub = etcdserverpb::Cluster::NewStub(cluster_->Channel(via));
      grpc::ClientContext ctx;
      SetDeadline(ctx, kCallTimeout);
      etcdserverpb::MemberPromoteRequest req;
      req.set_id(id);
      etcdserverpb::MemberPromoteResponse resp;
      grpc::Status s = stub->MemberPromote(&ctx, req, &resp);
      if (s.ok()) return Status::Ok();
      last = fmt::format("via n{}: {}", via + 1, s.error_message());
      break;
    }
    // Refused while it catches up; an answer lost after the promotion shows in the list.
    if (auto list = Members(); list.ok()) {
      const etcdserverpb::Member* m = FindMember(*list, id);
      if (m == nullptr) return Status::NotFound(fmt::format("member {:x} is gone", id));
      if (!m->islearner()) return Status::Ok();
    }
    std::this_thread::sleep_for(kRetryPause);
  }
  return Status::Timeout(fmt::format("{} not promoted within {} ms: {}", cluster_->node(slot).name,
                                     timeout.count(), last));
}

}  // namespace epoch::chaos
