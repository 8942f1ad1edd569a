#include "epoch/node/node_context.h"

#include <spdlog/spdlog.h>

#include "epoch/etcd_errors.h"
#include "epoch/node/space_quota.h"
#include "epoch/peer/leader_forwarder.h"
#include "epoch/peer/peer_forwarder.h"
#include "epoch/rpc/async_rpc.h"
#include "epoch/rpc/tls.h"
#include "epoch/state/published_members.h"

namespace epoch::server {
namespace {

// Errors after which a write was certainly not applied, so trying again (at the new leader) is
// safe: the request was refused before it reached a log, or its log slot went to another entry.
bool SafeToRetry(const Status& s) {
  return s.Is(ErrorId::kNotLeader) || s.Is(ErrorId::kNoLeader) || s.Is(ErrorId::kLeaderChanged) ||
         s.Is(ErrorId::kLeaderUnreachable);
}

constexpr auto kLeaderPoll = std::chrono::milliseconds(10);

// EpochNode checked the files before building the context; if they vanished since, calls to
// members' TLS client ports fail (no plaintext fallback).
std::shared_ptr<grpc::ChannelCredentials> MemberCredentials(const NodeConfig& config) {
  if (!config.client_tls.Any()) return nullptr;
  auto credentials = rpc::MakeMemberChannelCredentials(config.client_tls.server);
  if (credentials.ok()) return *credentials;
  spdlog::error("name={} no TLS credentials for calls to other members: {}", config.name,
                credentials.status().ToString());
  return nullptr;
}

// The signer of --auth-token jwt. FinishNodeFlags created one from the same options (the key
// files are read into them), so this cannot fail for a configuration that passed; a test's
// configuration without jwt gets none.
std::unique_ptr<JwtTokens> MakeJwt(const NodeConfig& config) {
  if (!config.auth_jwt) return nullptr;
  Result<std::unique_ptr<JwtTokens>> jwt = JwtTokens::Create(*config.auth_jwt);
  if (!jwt.ok()) {
    spdlog::critical("name={} --auth-token jwt: {}", config.name, jwt.status().ToString());
    std::abort();
  }
  return std::move(*jwt);
}

}  // namespace

NodeContext::NodeContext(const NodeConfig& config, RaftDriver& driver, KvStore& store,
                         asio::thread_pool& read_pool, PeerForwarder* peer_forwarder)
    : config_(config),
      driver_(driver),
      store_(store),
      read_pool_(read_pool),
      client_queue_(std::make_unique<rpc::ClientQueue>()),
      member_credentials_(MemberCredentials(config)),
      forwarder_(std::make_unique<LeaderForwarder>(
          *client_queue_, [this](NodeId id) { return ClientUrlOf(id); }, member_credentials_)),
      peer_forwarder_(peer_forwarder),
      timer_executor_(read_pool.get_executor()),
      auth_(store, config.client_tls.server.client_cert_auth,
            std::chrono::milliseconds(config.auth_token_ttl).count(), MakeJwt(config)),
      space_quota_(std::make_unique<SpaceQuota>(*this, config.SpaceQuotaBytes())) {}

NodeContext::~NodeContext() = default;

void NodeContext::Start() { space_quota_->Start(); }
void NodeContext::Stop() { space_quota_->Stop(); }

void NodeContext::Write(v1::InternalRequest request, std::chrono::system_clock::time_point deadline,
                        WriteCallback done) {
  if (!space_quota_->Admit(request)) {
    return done(etcd_errors::kNoSpace.ToStatus(), {});
  }
  auto wait = std::min(
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          deadline - std::chrono::system_clock::now()),
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(config_.leader_wait));
  auto give_up = std::chrono::steady_clock::now() + wait;
  WriteAttempt(std::make_shared<v1::InternalRequest>(std::move(request)), give_up, std::move(done));
}

void NodeContext::WriteAttempt(std::shared_ptr<v1::InternalRequest> request,
                               std::chrono::steady_clock::time_point give_up, WriteCallback done) {
  auto retry_or_fail = [this, request, give_up, done](const Status& s,
                                                      const v1::InternalResponse& r) {
    if (s.ok() || !SafeToRetry(s)) return done(s, r);
    if (std::chrono::steady_clock::now() >= give_up) {
      // Never sent to an unreachable leader: to the client that is a cluster without a usable
      // leader (Unavailable, which etcd clients retry), not our internal reason.
      return done(s.Is(ErrorId::kLeaderUnreachable) ? etcd_errors::kNoLeader.ToStatus() : s, r);
    }
    auto timer = std::make_shared<asio::steady_timer>(timer_executor_, kLeaderPoll);
    timer->async_wait([this, timer, request, give_up, done](std::error_code) {
      WriteAttempt(request, give_up, done);
    });
  };
  DriverStatus status = driver_.status();
  if (status.role == raft::Role::kLeader) {
    return driver_.Propose(*request, retry_or_fail);
  }
  if (status.leader == raft::kNoNode) return retry_or_fail(etcd_errors::kNoLeader.ToStatus(), {});
  if (peer_forwarder_ && PeerForwarder::Forwardable(*request)) {
    return peer_forwarder_->Forward(status.leader, *request, give_up + std::chrono::seconds(5),
                                    retry_or_fail);
  }
  auto deadline = std::chrono::system_clock::now() +
                  std::chrono::duration_cast<std::chrono::system_clock::duration>(
                      give_up - std::chrono::steady_clock::now()) +
                  std::chrono::seconds(5);
  forwarder_->Forward(status.leader, *request, deadline, retry_or_fail);
}

void NodeContext::ReadBarrier(bool serializable, ReadyCallback done, bool cheap) {
  // A member that joined serves nothing before its snapshot brought the cluster's data.
  if (config_.joined && store_.AppliedIndex() == LogIndex(0)) {
    return done(etcd_errors::kNotCapable.ToStatus("this member has not received the data yet"));
  }
  // A serializable read, or a linearizable one the leader's lease covers (checked here, off the
  // Raft strand), needs no wait: a cheap one is served on the calling thread, others on the
  // read pool so that a large range does not hold a gRPC thread.
  if (serializable || driver_.TryLeaseRead()) {
    if (cheap) return done(Status::Ok());
    return asio::post(read_pool_, [done = std::move(done)] { done(Status::Ok()); });
  }
  // The answer comes on the Raft strand. A cheap read goes back to the gRPC thread, as the
  // leader's lease reads are served there: the reads one ReadIndex answer releases share one hop
  // (rpc::ClientQueue::Post), where finishing each costs no wake-up (finished from the strand,
  // each woke the gRPC thread). Others go to the read pool. Without a running server (tests),
  // a cheap read is served on the strand (Dispatch).
  const auto give_up = std::chrono::steady_clock::now() + config_.leader_wait;
  ReadIndexAttempt(give_up, [this, cheap, done = std::move(done)](const Status& s) {
    if (cheap) {
      return client_queue_->Dispatch([s, done] { done(s); });
    }
    asio::post(read_pool_, [s, done] { done(s); });
  });
}

void NodeContext::ReadIndexAttempt(std::chrono::steady_clock::time_point give_up,
                                   std::function<void(const Status&)> done) {
  driver_.ReadIndex([this, give_up, done = std::move(done)](const Status& s) mutable {
    const bool leader_moved = s.Is(ErrorId::kLeaderChanged) || s.Is(ErrorId::kNoLeader);
    if (!leader_moved || std::chrono::steady_clock::now() >= give_up) return done(s);
    ++read_index_retries_;
    auto timer = std::make_shared<asio::steady_timer>(timer_executor_, kLeaderPoll);
    timer->async_wait([this, timer, give_up, done = std::move(done)](std::error_code) mutable {
      ReadIndexAttempt(give_up, std::move(done));
    });
  });
}

std::vector<std::string> NodeContext::ClientUrlsOf(const MemberInfo& member) const {
  std::shared_ptr<const PublishedMembers> published = store_.Members();
  if (const PublishedMember* p = FindPublished(*published, member.id.value())) {
    return p->client_urls;
  }
  if (member.client.port == 0) return {};
  const char* scheme = config_.client_tls.Https(0) ? "https://" : "http://";
  return {scheme + member.client.ToString()};
}

std::string NodeContext::ClientUrlOf(NodeId id) const {
  // On every forwarded lease call: no copy of the URL list. Members added at run time are
  // known only by what they published.
  std::shared_ptr<const PublishedMembers> published = store_.Members();
  if (const PublishedMember* p = FindPublished(*published, id.value())) {
    return p->client_urls.front();
  }
  const MemberInfo* member = config_.FindMember(id);
  if (member == nullptr) return "";
  if (member->client.port == 0) return "";
  return (config_.client_tls.Https(0) ? "https://" : "http://") + member->client.ToString();
}

void NodeContext::FillHeader(etcdserverpb::ResponseHeader* header) const {
  DriverStatus status = driver_.status();
  header->set_cluster_id(config_.cluster_id());
  header->set_member_id(config_.self_id().value());
  header->set_raft_term(status.term.value());
  if (header->revision() == 0) header->set_revision(store_.CurrentRevision().value());
}

}  // namespace epoch::server
