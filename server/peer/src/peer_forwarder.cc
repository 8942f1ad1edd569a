#include "epoch/peer/peer_forwarder.h"

#include <openssl/rand.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <vector>

#include "epoch/etcd_errors.h"
#include "epoch/peer/leader_forwarder.h"

namespace epoch::server {
namespace {

// How often pending writes are checked against their deadline.
constexpr auto kSweepPeriod = std::chrono::milliseconds(50);

Status StatusFromWire(std::uint32_t code, const std::string& message) {
  // The identity does not travel: an etcd error is recognised by its text, here at the edge.
  if (const EtcdError* known = FindEtcdError(message)) return known->ToStatus();
  if (code > static_cast<std::uint32_t>(StatusCode::kFailedPrecondition)) {
    return Status::Unavailable(message);
  }
  return Status::FromCode(static_cast<StatusCode>(code), message);
}

// An id no other member can predict: answers are matched by id, and ids leave on the wire.
std::uint64_t RandomId() {
  std::uint64_t id = 0;
  while (id == 0) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&id), sizeof(id)) != 1) {
      spdlog::critical("forward: RAND_bytes failed: no random forward id");
      std::abort();
    }
  }
  return id;
}

}  // namespace

struct PeerForwarder::Shared : std::enable_shared_from_this<Shared> {
  explicit Shared(asio::any_io_executor executor) : timer(std::move(executor)) {}

  mutable std::mutex mu;
  std::map<std::uint64_t, Pending> pending;  // guarded by mu
  asio::steady_timer timer;                  // guarded by mu
  bool timer_armed = false;                  // guarded by mu
  bool stopped = false;                      // guarded by mu

  // Called with mu held.
  void ArmLocked() {
    if (timer_armed || stopped || pending.empty()) return;
    timer_armed = true;
    timer.expires_after(kSweepPeriod);
    timer.async_wait([weak = weak_from_this()](std::error_code ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->Sweep();
    });
  }

  void Sweep() {
    std::vector<Callback> expired;
    {
      std::lock_guard lock(mu);
      timer_armed = false;
      const auto now = std::chrono::steady_clock::now();
      for (auto it = pending.begin(); it != pending.end();) {
        if (it->second.deadline <= now) {
          expired.push_back(std::move(it->second.done));
          it = pending.erase(it);
        } else {
          ++it;
        }
      }
      ArmLocked();
    }
    for (Callback& done : expired) done(etcd_errors::kTimeout.ToStatus(), {});
  }

  // The callback of pending write `id` (removed), or an empty one if it is no longer pending or
  // was sent to another node than `from` (when given).
  Callback Take(std::uint64_t id, std::optional<NodeId> from = std::nullopt) {
    std::lock_guard lock(mu);
    auto it = pending.find(id);
    if (it == pending.end() || (from && it->second.leader != *from)) return {};
    Callback done = std::move(it->second.done);
    pending.erase(it);
    return done;
  }

  std::vector<Callback> TakeLocked(NodeId leader) {
    std::vector<Callback> out;
    for (auto it = pending.begin(); it != pending.end();) {
      if (it->second.leader == leader) {
        out.push_back(std::move(it->second.done));
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }
};

PeerForwarder::PeerForwarder(asio::any_io_executor timer_executor, Hooks hooks)
    : hooks_(std::move(hooks)), shared_(std::make_shared<Shared>(std::move(timer_executor))) {}

PeerForwarder::~PeerForwarder() { Stop(); }

void PeerForwarder::Stop() {
  std::vector<Callback> orphans;
  {
    std::lock_guard lock(shared_->mu);
    shared_->stopped = true;
    shared_->timer.cancel();
    for (auto& [id, p] : shared_->pending) orphans.push_back(std::move(p.done));
    shared_->pending.clear();
  }
  for (Callback& done : orphans) {
    done(etcd_errors::kTimeoutDueToConnectionLost.ToStatus(), {});
  }
}

bool PeerForwarder::Forwardable(const v1::InternalRequest& request) {
  switch (request.request_case()) {
    case v1::InternalRequest::kPut:
    case v1::InternalRequest::kDeleteRange:
    case v1::InternalRequest::kTxn:
    case v1::InternalRequest::kCompaction:
    case v1::InternalRequest::kAlarm:
    case v1::InternalRequest::kMemberAttributes:
    // Cluster settings: the forwarding member checked the caller's permission (server/api).
    case v1::InternalRequest::kClusterTiming:
    // A client's lease revoke: stamped with the caller and the auth revision, checked at apply.
    case v1::InternalRequest::kLeaseRevoke:
    // Membership changes: the forwarding member checked the caller's permission (server/api).
    case v1::InternalRequest::kMemberChange:
    // Auth changes: the forwarding member checked the caller's permission (server/api).
    case v1::InternalRequest::kAuthEnable:
    case v1::InternalRequest::kAuthDisable:
    case v1::InternalRequest::kAuthenticate:
    case v1::InternalRequest::kAuthUserAdd:
    case v1::InternalRequest::kAuthUserDelete:
    case v1::InternalRequest::kAuthUserChangePassword:
    case v1::InternalRequest::kAuthUserGrantRole:
    case v1::InternalRequest::kAuthUserRevokeRole:
    case v1::InternalRequest::kAuthRoleAdd:
    case v1::InternalRequest::kAuthRoleDelete:
    case v1::InternalRequest::kAuthRoleGrantPermission:
    case v1::InternalRequest::kAuthRoleRevokePermission: return true;
    default: return false;
  }
}

std::string PeerForwarder::EncodeRequest(std::uint64_t id, const v1::InternalRequest& request) {
  raftpb::Frame frame;
  raftpb::ForwardRequest* f = frame.mutable_forward_request();
  f->set_id(id);
  request.SerializeToString(f->mutable_request());
  return frame.SerializeAsString();
}

std::string PeerForwarder::EncodeResponse(std::uint64_t id, const Status& status,
                                          const v1::InternalResponse& response) {
  raftpb::Frame frame;
  raftpb::ForwardResponse* f = frame.mutable_forward_response();
  f->set_id(id);
  f->set_code(static_cast<std::uint32_t>(status.code()));
  if (!status.ok()) {
    f->set_message(status.message());
  } else {
    response.SerializeToString(f->mutable_response());
  }
  return frame.SerializeAsString();
}

void PeerForwarder::Forward(NodeId leader, const v1::InternalRequest& request,
                            std::chrono::steady_clock::time_point deadline, Callback done) {
  // Not connected: do not send. The frame would sit in a queue that is dropped on reconnect, and
  // the caller could not tell whether the leader got it.
  if (!hooks_.connected(leader)) return done(etcd_errors::kLeaderUnreachable.ToStatus(), {});
  std::uint64_t id = 0;
  {
    std::lock_guard lock(shared_->mu);
    if (shared_->stopped) return done(etcd_errors::kStopped.ToStatus(), {});
    do {
      id = RandomId();
    } while (shared_->pending.contains(id));
    shared_->pending.emplace(id, Pending{leader, deadline, std::move(done)});
    shared_->ArmLocked();
  }
  hooks_.send(leader, EncodeRequest(id, request), [weak = std::weak_ptr<Shared>(shared_), id] {
    // Runs on the transport's strand (or inside send); the forwarder may be gone.
    // Never reached the socket: certainly not applied, so the caller may retry at the next
    // leader.
    if (auto shared = weak.lock()) {
      if (Callback unsent = shared->Take(id))
        unsent(etcd_errors::kLeaderUnreachable.ToStatus(), {});
    }
  });
}

void PeerForwarder::HandleResponse(NodeId from, const raftpb::ForwardResponse& response) {
  // Nothing pending: already timed out or failed by PeerLost, or an answer from a node we did not
  // ask (a stale connection, or a forgery).
  Callback done = shared_->Take(response.id(), from);
  if (!done) {
    if (hooks_.on_drop) hooks_.on_drop(FrameDrop::kForwardUnknown);
    return;
  }
  Status status = StatusFromWire(response.code(), response.message());
  v1::InternalResponse out;
  if (status.ok() && !out.ParseFromString(response.response())) {
    // The write was applied but its answer is unreadable: the outcome is not known to the client.
    status = etcd_errors::kTimeoutDueToConnectionLost.ToStatus();
  }
  done(status, out);
}

void PeerForwarder::PeerLost(NodeId peer) {
  std::vector<Callback> lost;
  {
    std::lock_guard lock(shared_->mu);
    lost = shared_->TakeLocked(peer);
  }
  for (Callback& done : lost) done(etcd_errors::kTimeoutDueToConnectionLost.ToStatus(), {});
}

void PeerForwarder::Serve(NodeId from, const raftpb::ForwardRequest& request) {
  v1::InternalRequest parsed;
  if (!parsed.ParseFromString(request.request()) || !Forwardable(parsed)) {
    spdlog::warn("forward: unparsable or unforwardable request {} from node {:x}", request.id(),
                 from);
    hooks_.send(from,
                EncodeResponse(request.id(),
                               Status::InvalidArgument("epoch: malformed forwarded request"), {}),
                {});
    return;
  }
  if (parsed.has_member_attributes() && NodeId(parsed.member_attributes().id()) != from) {
    // A member publishes its own client URLs, never another's.
    spdlog::warn("forward: node {:x} tried to publish the attributes of member {:x}", from,
                 parsed.member_attributes().id());
    if (hooks_.on_drop) hooks_.on_drop(FrameDrop::kForwardForged);
    hooks_.send(
        from,
        EncodeResponse(
            request.id(),
            Status::InvalidArgument("epoch: a member may publish only its own attributes"), {}),
        {});
    return;
  }
  hooks_.propose(std::move(parsed), [send = hooks_.send, from, id = request.id()](
                                        const Status& s, const v1::InternalResponse& r) {
    send(from, EncodeResponse(id, s, r), {});
  });
}

std::size_t PeerForwarder::pending() const {
  std::lock_guard lock(shared_->mu);
  return shared_->pending.size();
}

}  // namespace epoch::server
