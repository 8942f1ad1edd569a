#include "epoch/api/cluster_service.h"

#include <random>

#include "epoch/etcd_errors.h"
#include "epoch/rpc/grpc_util.h"
#include "epoch/state/member_table.h"
#include "epoch/state/published_members.h"

namespace epoch::server {
namespace {

// A fresh member ID: random, never 0 and never one the table holds (removed members included).
std::uint64_t NewMemberId(const v1::StoredMemberTable& table) {
  static thread_local std::mt19937_64 rng(std::random_device{}());
  for (;;) {
    const std::uint64_t id = rng();
    if (id != 0 && FindTableMember(table, id) == nullptr) return id;
  }
}

// etcd's types.NewURLs: every URL is scheme://host:port.
epoch::Status ValidatePeerUrls(const google::protobuf::RepeatedPtrField<std::string>& urls) {
  if (urls.empty()) return etcd_errors::kMemberBadUrls.ToStatus();
  for (const std::string& url : urls) {
    if (!url.starts_with("http://") && !url.starts_with("https://")) {
      return etcd_errors::kMemberBadUrls.ToStatus();
    }
    if (!ParseHostPort(url).ok()) return etcd_errors::kMemberBadUrls.ToStatus();
  }
  return epoch::Status::Ok();
}

const v1::ClusterMember* FindLive(const v1::StoredMemberTable& table, std::uint64_t id) {
  const v1::ClusterMember* m = FindTableMember(table, id);
  return m != nullptr && !m->removed() ? m : nullptr;
}

}  // namespace

void ClusterService::FillMember(const v1::ClusterMember& m, etcdserverpb::Member* out) const {
  out->set_id(m.id());
  out->set_name(m.name());
  *out->mutable_peerurls() = m.peer_urls();
  out->set_islearner(m.is_learner());
  std::shared_ptr<const PublishedMembers> published = node_.store().Members();
  if (const PublishedMember* p = FindPublished(*published, m.id())) {
    out->set_name(p->name);
    for (const std::string& url : p->client_urls) out->add_clienturls(url);
  } else if (const MemberInfo* initial = node_.config().FindMember(NodeId(m.id()))) {
    for (const std::string& url : node_.ClientUrlsOf(*initial)) out->add_clienturls(url);
  }
}

void ClusterService::FillMembers(
    const v1::StoredMemberTable& table,
    google::protobuf::RepeatedPtrField<etcdserverpb::Member>* out) const {
  for (const v1::ClusterMember& m : table.members()) {
    if (!m.removed()) FillMember(m, out->Add());
  }
}

rpc::UnaryReactor* ClusterService::MemberList(rpc::CallContext* ctx,
                                              const etcdserverpb::MemberListRequest*,
                                              etcdserverpb::MemberListResponse* response) {
  FillMembers(*node_.store().MemberTable(), response->mutable_members());
  node_.FillHeader(response->mutable_header());
  auto* reactor = ctx->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

void ClusterService::WriteChange(rpc::CallContext* ctx, rpc::UnaryReactor* reactor,
                                 v1::MemberChange change, Answer answer) {
  v1::InternalRequest internal;
  epoch::Status allowed = node_.auth().AuthorizeAdmin(*ctx, &internal);
  if (!allowed.ok()) return reactor->Finish(ToGrpc(allowed));
  *internal.mutable_member_change() = std::move(change);
  node_.Write(
      std::move(internal), ctx->deadline(),
      [reactor, answer = std::move(answer)](const epoch::Status& s, const v1::InternalResponse& r) {
        if (!s.ok()) return reactor->Finish(ToGrpc(s));
        v1::StoredMemberTable table;
        *table.mutable_members() = r.member_change().members();
        answer(table);
      });
}

rpc::UnaryReactor* ClusterService::MemberAdd(rpc::CallContext* ctx,
                                             const etcdserverpb::MemberAddRequest* request,
                                             etcdserverpb::MemberAddResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  epoch::Status valid = ValidatePeerUrls(request->peerurls());
  if (!valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  v1::MemberChange change;
  change.set_kind(v1::MemberChange::ADD);
  change.set_id(NewMemberId(*node_.store().MemberTable()));
  *change.mutable_peer_urls() = request->peerurls();
  change.set_is_learner(request->islearner());
  const std::uint64_t id = change.id();
  WriteChange(ctx, reactor, std::move(change),
              [this, reactor, response, id](const v1::StoredMemberTable& table) {
                if (const v1::ClusterMember* added = FindLive(table, id)) {
                  FillMember(*added, response->mutable_member());
                }
                FillMembers(table, response->mutable_members());
                node_.FillHeader(response->mutable_header());
                reactor->Finish(grpc::Status::OK);
              });
  return reactor;
}

rpc::UnaryReactor* ClusterService::MemberRemove(rpc::CallContext* ctx,
                                                const etcdserverpb::MemberRemoveRequest* request,
                                                etcdserverpb::MemberRemoveResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  v1::MemberChange change;
  change.set_kind(v1::MemberChange::REMOVE);
  change.set_id(request->id());
  WriteChange(ctx, reactor, std::move(change), ListMembers(reactor, response));
  return reactor;
}

rpc::UnaryReactor* ClusterService::MemberUpdate(rpc::CallContext* ctx,
                                                const etcdserverpb::MemberUpdateRequest* request,
                                                etcdserverpb::MemberUpdateResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  epoch::Status valid = ValidatePeerUrls(request->peerurls());
  if (!valid.ok()) {
    reactor->Finish(ToGrpc(valid));
    return reactor;
  }
  v1::MemberChange change;
  change.set_kind(v1::MemberChange::UPDATE);
  change.set_id(request->id());
  *change.mutable_peer_urls() = request->peerurls();
  WriteChange(ctx, reactor, std::move(change), ListMembers(reactor, response));
  return reactor;
}

rpc::UnaryReactor* ClusterService::MemberPromote(rpc::CallContext* ctx,
                                                 const etcdserverpb::MemberPromoteRequest* request,
                                                 etcdserverpb::MemberPromoteResponse* response) {
  auto* reactor = ctx->DefaultReactor();
  v1::MemberChange change;
  change.set_kind(v1::MemberChange::PROMOTE);
  change.set_id(request->id());
  WriteChange(ctx, reactor, std::move(change), ListMembers(reactor, response));
  return reactor;
}

void ClusterService::Register(rpc::Server& server) {
  using Async = etcdserverpb::Cluster::AsyncService;
  server.Unary(this, &Async::RequestMemberAdd,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return MemberAdd(c, q, r); },
               {.pending = 1});
  server.Unary(
      this, &Async::RequestMemberRemove,
      [this](rpc::CallContext* c, const auto* q, auto* r) { return MemberRemove(c, q, r); },
      {.pending = 1});
  server.Unary(
      this, &Async::RequestMemberUpdate,
      [this](rpc::CallContext* c, const auto* q, auto* r) { return MemberUpdate(c, q, r); },
      {.pending = 1});
  server.Unary(this, &Async::RequestMemberList,
               [this](rpc::CallContext* c, const auto* q, auto* r) { return MemberList(c, q, r); },
               {.pending = 2});
  server.Unary(
      this, &Async::RequestMemberPromote,
      [this](rpc::CallContext* c, const auto* q, auto* r) { return MemberPromote(c, q, r); },
      {.pending = 1});
}

}  // namespace epoch::server
