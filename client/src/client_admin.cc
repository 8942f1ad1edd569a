// Admin calls over Client::Channel(): see admin.h for the contract.
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <utility>

#include "admin_call.h"
#include "epoch/client/admin.h"
#include "epoch/client/errors.h"
#include "epoch/etcd_errors.h"
#include "epoch/v1/epoch.grpc.pb.h"
#include "etcdserverpb/rpc.grpc.pb.h"
#include "grpc_status.h"

namespace epoch::client {

using internal::Classified;
using internal::Disposition;
using SteadyTime = std::chrono::steady_clock::time_point;

namespace {

std::chrono::system_clock::time_point ToSystem(SteadyTime deadline) {
  return std::chrono::system_clock::now() +
         std::chrono::duration_cast<std::chrono::system_clock::duration>(
             deadline - std::chrono::steady_clock::now());
}

SteadyTime DeadlineOf(const Client& client, const CallOptions& call) {
  return std::chrono::steady_clock::now() + call.timeout.value_or(client.options().call_timeout);
}

// Waits for endpoint `index` to connect, up to dial_timeout and the deadline, in 50 ms steps
// (a step polls the channel, see the note on Connect in client.cc).
bool Connect(Client& client, std::size_t index, SteadyTime deadline, const std::stop_token& stop) {
  auto channel = client.Channel(index);
  const SteadyTime dial_deadline =
      std::min(deadline, std::chrono::steady_clock::now() + client.options().dial_timeout);
  while (!stop.stop_requested()) {
    const SteadyTime now = std::chrono::steady_clock::now();
    if (now >= dial_deadline) return channel->GetState(true) == GRPC_CHANNEL_READY;
    if (channel->WaitForConnected(
            ToSystem(std::min(dial_deadline, now + std::chrono::milliseconds(50))))) {
      return true;
    }
  }
  return false;
}

Status Unsupported(std::string_view what, const grpc::Status& status) {
  return Status::FailedPrecondition(
      fmt::format("{} is not supported by this cluster (the server answered UNIMPLEMENTED{}{})",
                  what, status.error_message().empty() ? "" : ": ", status.error_message()));
}

// One pass over `count` endpoints from endpoint `first`. `fn(channel, context, response)`.
// Reads move on after transient failures; writes only when nothing was sent.
template <typename Response, typename Fn>
Result<Response> CallFrom(Client& client, std::string_view what, bool idempotent,
                          const CallOptions& call, std::size_t first, std::size_t count, Fn&& fn) {
  const SteadyTime deadline = DeadlineOf(client, call);
  const std::size_t n = client.endpoints().size();
  Status last = Status::Unavailable(fmt::format("{}: no endpoint could be connected", what));
  bool reauthenticated = false;
  for (std::size_t k = 0; k < count; ++k) {
    if (call.stop.stop_requested()) return Status::Aborted(fmt::format("{}: cancelled", what));
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::Timeout("deadline exceeded: " + last.ToString());
    }
    const std::size_t index = (first + k) % n;
    const std::string& target = client.endpoints()[index];
    if (!Connect(client, index, deadline, call.stop)) {
      last = Status::Unavailable(fmt::format("{}: cannot connect to {}", what, target));
      continue;
    }
    grpc::ClientContext context;
    context.set_deadline(ToSystem(deadline));
    Result<std::string> token = client.Authorize(context, call);
    if (!token.ok()) return token.status();
    Response response;
    grpc::Status result;
    {
      std::stop_callback cancel(call.stop, [&context] { context.TryCancel(); });
      result = fn(client.Channel(index), &context, &response);
    }
    if (result.error_code() == grpc::StatusCode::UNIMPLEMENTED) return Unsupported(what, result);
    Classified c = internal::Classify(result);
    if (c.disposition == Disposition::kOk) return response;
    last = c.status.Annotate(fmt::format("{} on {}", what, target));
    // Refused for an expired token before acting: the same endpoint again with a fresh one.
    if (!reauthenticated && internal::IsTokenRefusal(c.status) && client.DropToken(*token)) {
      reauthenticated = true;
      --k;
      continue;
    }
    if (c.disposition == Disposition::kFinal || c.disposition == Disposition::kStopped) return last;
    if (!idempotent && c.disposition != Disposition::kNotApplied) return OutcomeUnknown(last);
  }
  return last;
}

// CallFrom over every endpoint, starting at the preferred one.
template <typename Response, typename Fn>
Result<Response> CallOnEndpoints(Client& client, std::string_view what, bool idempotent,
                                 const CallOptions& call, Fn&& fn) {
  return CallFrom<Response>(client, what, idempotent, call, client.preferred_endpoint(),
                            client.endpoints().size(), std::forward<Fn>(fn));
}

}  // namespace

Result<etcdserverpb::AlarmResponse> Alarm(Client& client, const etcdserverpb::AlarmRequest& request,
                                          const CallOptions& call) {
  const bool read = request.action() == etcdserverpb::AlarmRequest::GET;
  return CallOnEndpoints<etcdserverpb::AlarmResponse>(
      client, "Alarm", read, call, [&](auto channel, grpc::ClientContext* c, auto* r) {
        return etcdserverpb::Maintenance::NewStub(channel)->Alarm(c, request, r);
      });
}

Result<etcdserverpb::DefragmentResponse> Defragment(Client& client, std::size_t endpoint,
                                                    const CallOptions& call) {
  // Exactly this endpoint: a member's defragmentation is its own. Repeating one is harmless.
  return CallFrom<etcdserverpb::DefragmentResponse>(
      client, "Defragment", /*idempotent=*/true, call, endpoint, 1,
      [](auto channel, grpc::ClientContext* c, auto* r) {
        return etcdserverpb::Maintenance::NewStub(channel)->Defragment(
            c, etcdserverpb::DefragmentRequest(), r);
      });
}

// One call to the leader, found through DiscoverLeader; sent once.
template <typename Response, typename Fn>
Result<Response> CallOnLeader(Client& client, std::string_view what, const CallOptions& call,
                              Fn fn) {
  Result<std::size_t> leader = client.DiscoverLeader(call);
  if (!leader.ok()) return leader.status();
  const SteadyTime deadline = DeadlineOf(client, call);
  if (!Connect(client, *leader, deadline, call.stop)) {
    return Status::Unavailable(
        fmt::format("{}: cannot connect to the leader {}", what, client.endpoints()[*leader]));
  }
  grpc::ClientContext context;
  context.set_deadline(ToSystem(deadline));
  Result<std::string> token = client.Authorize(context, call);
  if (!token.ok()) return token.status();
  std::stop_callback cancel(call.stop, [&context] { context.TryCancel(); });
  Response response;
  const grpc::Status result = fn(client.Channel(*leader), &context, &response);
  if (result.error_code() == grpc::StatusCode::UNIMPLEMENTED) return Unsupported(what, result);
  Classified c = internal::Classify(result);
  if (c.disposition == Disposition::kOk) return response;
  return c.status.Annotate(fmt::format("{} on {}", what, client.endpoints()[*leader]));
}

Result<etcdserverpb::MoveLeaderResponse> MoveLeader(Client& client, std::uint64_t target_member_id,
                                                    const CallOptions& call) {
  etcdserverpb::MoveLeaderRequest request;
  request.set_targetid(target_member_id);
  return CallOnLeader<etcdserverpb::MoveLeaderResponse>(
      client, "move-leader", call, [&](auto channel, grpc::ClientContext* c, auto* r) {
        return etcdserverpb::Maintenance::NewStub(channel)->MoveLeader(c, request, r);
      });
}

Result<v1::TimingResponse> ClusterTiming(Client& client, const CallOptions& call) {
  return CallOnLeader<v1::TimingResponse>(
      client, "cluster timing", call, [&](auto channel, grpc::ClientContext* c, auto* r) {
        return v1::Settings::NewStub(channel)->Timing(c, v1::TimingRequest(), r);
      });
}

Result<v1::TimingResponse> SetClusterTiming(Client& client, const v1::SetTimingRequest& request,
                                            const CallOptions& call) {
  return CallOnEndpoints<v1::TimingResponse>(client, "cluster timing set", false, call,
                                             [&](auto channel, grpc::ClientContext* c, auto* r) {
                                               return v1::Settings::NewStub(channel)->SetTiming(
                                                   c, request, r);
                                             });
}

Result<etcdserverpb::MemberAddResponse> MemberAdd(Client& client,
                                                  const etcdserverpb::MemberAddRequest& request,
                                                  const CallOptions& call) {
  return CallOnEndpoints<etcdserverpb::MemberAddResponse>(
      client, "member add", false, call, [&](auto channel, grpc::ClientContext* c, auto* r) {
        return etcdserverpb::Cluster::NewStub(channel)->MemberAdd(c, request, r);
      });
}

Result<etcdserverpb::MemberRemoveResponse> MemberRemove(Client& client, std::uint64_t member_id,
                                                        const CallOptions& call) {
  etcdserverpb::MemberRemoveRequest request;
  request.set_id(member_id);
  return CallOnEndpoints<etcdserverpb::MemberRemoveResponse>(
      client, "member remove", false, call, [&](auto channel, grpc::ClientContext* c, auto* r) {
        return etcdserverpb::Cluster::NewStub(channel)->MemberRemove(c, request, r);
      });
}

Result<etcdserverpb::MemberUpdateResponse> MemberUpdate(Client& client, std::uint64_t member_id,
                                                        const std::vector<std::string>& peer_urls,
                                                        const CallOptions& call) {
  etcdserverpb::MemberUpdateRequest request;
  request.set_id(member_id);
  for (const std::string& url : peer_urls) request.add_peerurls(url);
  return CallOnEndpoints<etcdserverpb::MemberUpdateResponse>(
      client, "member update", false, call, [&](auto channel, grpc::ClientContext* c, auto* r) {
        return etcdserverpb::Cluster::NewStub(channel)->MemberUpdate(c, request, r);
      });
}

Result<etcdserverpb::MemberPromoteResponse> MemberPromote(Client& client, std::uint64_t member_id,
                                                          const CallOptions& call) {
  etcdserverpb::MemberPromoteRequest request;
  request.set_id(member_id);
  return CallOnEndpoints<etcdserverpb::MemberPromoteResponse>(
      client, "member promote", false, call, [&](auto channel, grpc::ClientContext* c, auto* r) {
        return etcdserverpb::Cluster::NewStub(channel)->MemberPromote(c, request, r);
      });
}

Result<std::uint64_t> SaveSnapshot(Client& client, const SnapshotSink& sink,
                                   const CallOptions& call) {
  struct Progress {
    std::uint64_t bytes = 0;
    Status sink_status;
  } progress;
  // The stream is read to its end inside `fn`; a failure after the first byte is final.
  auto fn = [&](auto channel, grpc::ClientContext* c, etcdserverpb::SnapshotResponse* last) {
    auto stub = etcdserverpb::Maintenance::NewStub(channel);
    auto reader = stub->Snapshot(c, etcdserverpb::SnapshotRequest());
    etcdserverpb::SnapshotResponse piece;
    while (reader->Read(&piece)) {
      progress.bytes += piece.blob().size();
      progress.sink_status = sink(piece.blob());
      if (!progress.sink_status.ok()) {
        c->TryCancel();
        break;
      }
      *last = piece;
    }
    return reader->Finish();
  };
  // Not idempotent for the loop: once bytes were written to the sink, another member's image
  // must not be appended to them.
  Result<etcdserverpb::SnapshotResponse> done =
      CallOnEndpoints<etcdserverpb::SnapshotResponse>(client, "Snapshot", false, call, fn);
  if (!progress.sink_status.ok()) return progress.sink_status;
  if (!done.ok()) {
    if (progress.bytes == 0) return done.status();
    return Status::IOError(fmt::format("snapshot stream broke after {} bytes: {}", progress.bytes,
                                       done.status().message()));
  }
  if (done->remaining_bytes() != 0) {
    return Status::IOError(fmt::format("snapshot stream ended with {} bytes still announced",
                                       done->remaining_bytes()));
  }
  return progress.bytes;
}

Result<v1::LeaseStatusResponse> LeaseStatus(Client& client, LeaseId lease, bool keys,
                                            const CallOptions& call) {
  v1::LeaseStatusRequest request;
  request.set_id(lease.value());
  request.set_keys(keys);
  Result<v1::LeaseStatusResponse> response = CallOnEndpoints<v1::LeaseStatusResponse>(
      client, "epoch.v1.Lease/Status", true, call,
      [&](auto channel, grpc::ClientContext* c, auto* r) {
        return v1::Lease::NewStub(channel)->Status(c, request, r);
      });
  if (response.ok() && !response->found()) {
    return etcd_errors::kLeaseNotFound.ToStatus();
  }
  return response;
}

Result<v1::ClockStatusResponse> ClockStatus(Client& client, const CallOptions& call) {
  return CallOnEndpoints<v1::ClockStatusResponse>(
      client, "epoch.v1.Lease/ClockStatus", true, call,
      [&](auto channel, grpc::ClientContext* c, auto* r) {
        return v1::Lease::NewStub(channel)->ClockStatus(c, v1::ClockStatusRequest(), r);
      });
}

}  // namespace epoch::client

namespace epoch::client::internal {

Status CallAdmin(Client& client, std::string_view what, bool idempotent, const CallOptions& call,
                 const AdminAttempt& attempt) {
  struct Nothing {};  // the attempt keeps its own response
  return CallOnEndpoints<Nothing>(client, what, idempotent, call,
                                  [&](auto channel, grpc::ClientContext* c, Nothing*) {
                                    return attempt(std::move(channel), c);
                                  })
      .status();
}

}  // namespace epoch::client::internal
