// ClusterService (etcdserverpb.Cluster): `etcdctl member list|add|remove|update|promote`.
//
// MemberList answers from this member's applied member table (epoch/state/member_table.h) and
// the members' published client URLs, as etcd 3.4 answers from its local cluster view.
// MemberAdd / MemberRemove / MemberUpdate / MemberPromote become an InternalRequest.member_change
// written through NodeContext::Write (forwarded to the leader like any write); the leader checks
// it (PlanMemberChange: etcd's errors, --strict-reconfig-check) and proposes it as a Raft
// configuration change, and the answer is the member table once the change has applied. A new
// member's ID is random and never one the table has held. Root only while auth is on.
//
// Threading: handlers run on gRPC threads and never block; answers come from the write path.
#pragma once

#include "epoch/node/node_context.h"
#include "epoch/rpc/async_rpc.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

class ClusterService final : public etcdserverpb::Cluster::AsyncService {
 public:
  // Registers every method of the service with `server` (before it starts).
  void Register(rpc::Server& server);

  explicit ClusterService(NodeContext& node) : node_(node) {}

  rpc::UnaryReactor* MemberList(rpc::CallContext* ctx,
                                const etcdserverpb::MemberListRequest* request,
                                etcdserverpb::MemberListResponse* response);
  rpc::UnaryReactor* MemberAdd(rpc::CallContext* ctx, const etcdserverpb::MemberAddRequest* request,
                               etcdserverpb::MemberAddResponse* response);
  rpc::UnaryReactor* MemberRemove(rpc::CallContext* ctx,
                                  const etcdserverpb::MemberRemoveRequest* request,
                                  etcdserverpb::MemberRemoveResponse* response);
  rpc::UnaryReactor* MemberUpdate(rpc::CallContext* ctx,
                                  const etcdserverpb::MemberUpdateRequest* request,
                                  etcdserverpb::MemberUpdateResponse* response);
  rpc::UnaryReactor* MemberPromote(rpc::CallContext* ctx,
                                   const etcdserverpb::MemberPromoteRequest* request,
                                   etcdserverpb::MemberPromoteResponse* response);

 private:
  // Writes `change` (root only while auth is on); `answer` fills the response from the member
  // table after it applied and finishes the call.
  using Answer = std::function<void(const v1::StoredMemberTable&)>;
  void WriteChange(rpc::CallContext* ctx, rpc::UnaryReactor* reactor, v1::MemberChange change,
                   Answer answer);
  // The live members of `table` as etcd's Member messages.
  void FillMembers(const v1::StoredMemberTable& table,
                   google::protobuf::RepeatedPtrField<etcdserverpb::Member>* out) const;
  void FillMember(const v1::ClusterMember& m, etcdserverpb::Member* out) const;
  // The answer of a change whose response is the member list and the header.
  template <typename Response>
  Answer ListMembers(rpc::UnaryReactor* reactor, Response* response) {
    return [this, reactor, response](const v1::StoredMemberTable& table) {
      FillMembers(table, response->mutable_members());
      node_.FillHeader(response->mutable_header());
      reactor->Finish(grpc::Status::OK);
    };
  }

  NodeContext& node_;
};

}  // namespace epoch::server
