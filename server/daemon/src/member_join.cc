#include "member_join.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "epoch/peer/peer_join.h"
#include "epoch/snapshot/snapshot_io.h"
#include "epoch/state/published_members.h"
#include "node_flags.h"

namespace epoch::server {
namespace {

constexpr char kIdentityFile[] = "member";
// How long a joining member keeps asking its peers, and one attempt's bound.
constexpr auto kJoinPatience = std::chrono::seconds(30);
constexpr auto kJoinAttempt = std::chrono::seconds(2);
// A member bootstrapping with `new` asks each peer once, briefly.
constexpr auto kBootstrapCheck = std::chrono::milliseconds(1000);

bool SameAddress(std::string_view a, std::string_view b) {
  Result<HostPort> x = ParseHostPort(a);
  Result<HostPort> y = ParseHostPort(b);
  return x.ok() && y.ok() && *x == *y;
}

bool HasPeerUrl(const v1::ClusterMember& m, const raftpb::JoinRequest& request) {
  for (const std::string& mine : m.peer_urls()) {
    for (const std::string& asked : request.peer_urls()) {
      if (SameAddress(mine, asked)) return true;
    }
  }
  return false;
}

// One answer from the first peer in --initial-cluster (other than this member) that gives one
// within `patience`, asking each for at most `attempt`.
Result<raftpb::JoinResponse> AskPeers(const NodeConfig& config, const raftpb::JoinRequest& request,
                                      const std::shared_ptr<PeerTls>& tls,
                                      std::chrono::milliseconds patience,
                                      std::chrono::milliseconds attempt) {
  const auto give_up = std::chrono::steady_clock::now() + patience;
  Status last = Status::Unavailable("no peer listed in --initial-cluster");
  do {
    for (const MemberInfo& m : config.members) {
      if (m.name == config.name) continue;
      const HostPort& at = config.PeerDialAddress(m);
      Result<raftpb::JoinResponse> answer =
          AskToJoin(at.host, at.port, request, attempt, JoinTls{tls, m.name});
      if (answer.ok()) return answer;
      last = answer.status();
    }
    if (std::chrono::steady_clock::now() + attempt >= give_up) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  } while (std::chrono::steady_clock::now() < give_up);
  return last;
}

// The configuration of a member that joined: its IDs from the cluster, the live members as
// the peers it dials first (the member table replaces them once its snapshot is installed).
void AdoptIdentity(NodeConfig* config, const JoinedIdentity& id) {
  // A restart: --initial-cluster names this member, under the ID its name would have had.
  const NodeId named = MemberIdFor(config->cluster_token, config->name);
  for (MemberInfo& m : config->members) {
    if (m.id == named) m.id = id.member_id;
  }
  config->raft.id = id.member_id;
  config->joined_cluster_id = id.cluster_id;
  config->joined = true;
}

void AdoptMembers(NodeConfig* config, const raftpb::JoinResponse& answer) {
  const MemberInfo* old_self = config->FindMember(MemberIdFor(config->cluster_token, config->name));
  const HostPort own_client = old_self != nullptr ? old_self->client : HostPort{};
  std::vector<MemberInfo> members;
  for (const raftpb::JoinMember& m : answer.members()) {
    if (m.peer_urls().empty()) continue;
    Result<HostPort> peer = ParseHostPort(m.peer_urls(0));
    if (!peer.ok()) continue;
    MemberInfo info{NodeId(m.id()), m.name(), *peer, {}};
    if (m.id() == answer.member_id()) {
      info.name = config->name;
      info.client = own_client;
    }
    members.push_back(std::move(info));
  }
  config->members = std::move(members);
}

// A running member asking whether it was removed: REMOVED only on the table's record (committed,
// so final); a member this table does not know yet may have been added after its last apply.
raftpb::JoinResponse AnswerRemovalProbe(const NodeConfig& config,
                                        const v1::StoredMemberTable& table, std::uint64_t id) {
  raftpb::JoinResponse answer;
  answer.set_cluster_id(config.cluster_id());
  answer.set_member_id(id);
  for (const v1::ClusterMember& m : table.members()) {
    if (m.id() != id || !m.removed()) continue;
    answer.set_refusal(raftpb::JoinResponse::REMOVED);
    answer.set_error(
        fmt::format("member {:x} was removed from cluster {:x}", id, config.cluster_id()));
  }
  return answer;
}

}  // namespace

Result<std::optional<JoinedIdentity>> ReadJoinedIdentity(const std::string& data_dir) {
  const std::string path = data_dir + "/" + kIdentityFile;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<JoinedIdentity>();
  std::ifstream in(path);
  std::string key_a, key_b;
  std::uint64_t cluster = 0, member = 0;
  in >> key_a >> std::hex >> cluster >> key_b >> std::hex >> member;
  if (!in || key_a != "cluster_id" || key_b != "member_id" || cluster == 0 || member == 0) {
    return Status::Corruption(
        fmt::format("{}: not 'cluster_id <hex>' and 'member_id <hex>'", path));
  }
  return std::optional<JoinedIdentity>(JoinedIdentity{cluster, NodeId(member)});
}

std::string OwnPeerUrl(const NodeConfig& config) {
  const MemberInfo* self = config.FindMember(config.self_id());
  return "http://" + (self != nullptr ? self->peer : config.listen_peer).ToString();
}

Status WriteJoinedIdentity(const std::string& data_dir, const JoinedIdentity& id) {
  return WriteDataDirFile(
      data_dir, kIdentityFile,
      fmt::format("cluster_id {:x}\nmember_id {:x}\n", id.cluster_id, id.member_id.value()));
}

Status WriteDataDirFile(const std::string& data_dir, const std::string& name,
                        std::string_view text) {
  const std::string path = data_dir + "/" + name;
  const std::string tmp = path + ".tmp";
  std::error_code ignored;
  std::filesystem::remove(tmp, ignored);
  {
    Result<snapshot_io::File> file = snapshot_io::OpenForWrite(tmp);
    if (!file.ok()) return file.status();
    EPOCH_RETURN_IF_ERROR(snapshot_io::WriteAt(*file, tmp, 0, text));
    EPOCH_RETURN_IF_ERROR(snapshot_io::SyncFile(*file, tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return Status::IOError(fmt::format("rename {} to {}: {}", tmp, path, ec.message()));
  return snapshot_io::SyncDir(data_dir);
}

Status PrepareMembership(NodeConfig* config, bool fresh) {
  Result<std::optional<JoinedIdentity>> known = ReadJoinedIdentity(config->data_dir);
  if (!known.ok()) return known.status();
  if (known->has_value()) {
    AdoptIdentity(config, **known);
    spdlog::info("name={} node={:x} joined cluster {:x} ({}/{})", config->name,
                 (*known)->member_id.value(), (*known)->cluster_id, config->data_dir,
                 kIdentityFile);
    return Status::Ok();
  }
  if (!fresh) {
    if (config->join_existing) config->join_existing = false;  // a restart on its own data
    return Status::Ok();
  }
  // The join handshake runs over peer TLS like every peer connection.
  std::shared_ptr<PeerTls> tls;
  if (const PeerTlsOptions tls_options = PeerTlsOptionsOf(*config); tls_options.enabled()) {
    Result<std::shared_ptr<PeerTls>> created = PeerTls::Create(tls_options);
    if (!created.ok()) return created.status();
    tls = *created;
  }
  raftpb::JoinRequest request;
  request.set_name(config->name);
  request.add_peer_urls(OwnPeerUrl(*config));
  if (!config->join_existing) {
    // Bootstrapping `new` on an empty directory: refused if the cluster knows this member.
    Result<raftpb::JoinResponse> answer =
        AskPeers(*config, request, tls, std::chrono::milliseconds(0), kBootstrapCheck);
    if (answer.ok() && (answer->refusal() == raftpb::JoinResponse::ALREADY_STARTED ||
                        answer->refusal() == raftpb::JoinResponse::REMOVED)) {
      return Status::FailedPrecondition(answer->error());
    }
    return Status::Ok();
  }
  Result<raftpb::JoinResponse> answer =
      AskPeers(*config, request, tls, kJoinPatience, kJoinAttempt);
  if (!answer.ok()) {
    return answer.status().Annotate(
        "--initial-cluster-state existing: no member listed in --initial-cluster answered");
  }
  if (answer->refusal() != raftpb::JoinResponse::NONE) {
    return Status::FailedPrecondition(answer->error());
  }
  const JoinedIdentity id{answer->cluster_id(), NodeId(answer->member_id())};
  AdoptMembers(config, *answer);
  AdoptIdentity(config, id);
  EPOCH_RETURN_IF_ERROR(WriteJoinedIdentity(config->data_dir, id));
  spdlog::info("name={} node={:x} joining cluster {:x} with {} members", config->name,
               id.member_id.value(), id.cluster_id, config->members.size());
  return Status::Ok();
}

raftpb::JoinResponse AnswerJoin(const NodeConfig& config, const KvStore& store,
                                const raftpb::JoinRequest& request) {
  MemberTablePtr table = store.MemberTable();
  if (request.member_id() != 0) return AnswerRemovalProbe(config, *table, request.member_id());
  raftpb::JoinResponse answer;
  const v1::ClusterMember* found = nullptr;
  const v1::ClusterMember* removed = nullptr;
  for (const v1::ClusterMember& m : table->members()) {
    if (!HasPeerUrl(m, request)) continue;
    (m.removed() ? removed : found) = &m;
  }
  if (found == nullptr) {
    answer.set_refusal(removed != nullptr ? raftpb::JoinResponse::REMOVED
                                          : raftpb::JoinResponse::UNKNOWN_MEMBER);
    answer.set_error(
        removed != nullptr
            ? fmt::format("member {:x} was removed from cluster {:x}; add a new member instead",
                          removed->id(), config.cluster_id())
            : fmt::format("cluster {:x} has no member with peer URLs {}: add it first (etcdctl "
                          "member add)",
                          config.cluster_id(), fmt::join(request.peer_urls(), ",")));
    return answer;
  }
  std::shared_ptr<const PublishedMembers> published = store.Members();
  if (FindPublished(*published, found->id()) != nullptr) {
    answer.set_refusal(raftpb::JoinResponse::ALREADY_STARTED);
    answer.set_error(fmt::format(
        "member {:x} has already been bootstrapped: its data directory is gone; remove it "
        "(etcdctl member remove) and add a new member",
        found->id()));
    return answer;
  }
  answer.set_cluster_id(config.cluster_id());
  answer.set_member_id(found->id());
  for (const v1::ClusterMember& m : table->members()) {
    if (m.removed()) continue;
    raftpb::JoinMember* out = answer.add_members();
    out->set_id(m.id());
    const PublishedMember* p = FindPublished(*published, m.id());
    out->set_name(p != nullptr ? p->name : m.name());
    *out->mutable_peer_urls() = m.peer_urls();
    out->set_is_learner(m.is_learner());
  }
  return answer;
}

}  // namespace epoch::server
