// Helpers for the Lock / Election / fencing tests: gRPC calls without assertions (safe on any
// thread), and a queue a reader thread fills and the test thread drains with a deadline.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "etcdserverpb/rpc.grpc.pb.h"
#include "v3electionpb/v3election.grpc.pb.h"
#include "v3lockpb/v3lock.grpc.pb.h"

namespace epoch::integration {

inline std::chrono::system_clock::time_point In(std::chrono::milliseconds d) {
  return std::chrono::system_clock::now() + d;
}

// Grants a lease of `ttl_s` seconds through `channel`; 0 on failure.
inline std::int64_t GrantLease(const std::shared_ptr<grpc::Channel>& channel, std::int64_t ttl_s) {
  auto stub = etcdserverpb::Lease::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(5)));
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(ttl_s);
  etcdserverpb::LeaseGrantResponse response;
  return stub->LeaseGrant(&ctx, request, &response).ok() ? response.id() : 0;
}

inline grpc::Status RevokeLease(const std::shared_ptr<grpc::Channel>& channel, std::int64_t id) {
  auto stub = etcdserverpb::Lease::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(5)));
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id);
  etcdserverpb::LeaseRevokeResponse response;
  return stub->LeaseRevoke(&ctx, request, &response);
}

// The outcome of a Lock or Campaign call, with the fencing token from the trailing metadata
// (-1 if absent).
struct LockOutcome {
  grpc::Status status;
  std::string key;
  std::int64_t header_revision = 0;
  std::int64_t token = -1;
};

inline std::int64_t TokenFrom(const grpc::ClientContext& ctx) {
  auto [begin, end] = ctx.GetServerTrailingMetadata().equal_range("epoch-fencing-token");
  if (begin == end) return -1;
  return std::stoll(std::string(begin->second.data(), begin->second.size()));
}

inline LockOutcome Lock(const std::shared_ptr<grpc::Channel>& channel, const std::string& name,
                        std::int64_t lease,
                        std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  auto stub = v3lockpb::Lock::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(timeout));
  v3lockpb::LockRequest request;
  request.set_name(name);
  request.set_lease(lease);
  v3lockpb::LockResponse response;
  LockOutcome out;
  out.status = stub->Lock(&ctx, request, &response);
  out.key = response.key();
  out.header_revision = response.header().revision();
  if (out.status.ok()) out.token = TokenFrom(ctx);
  return out;
}

inline grpc::Status Unlock(const std::shared_ptr<grpc::Channel>& channel, const std::string& key) {
  auto stub = v3lockpb::Lock::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(5)));
  v3lockpb::UnlockRequest request;
  request.set_key(key);
  v3lockpb::UnlockResponse response;
  return stub->Unlock(&ctx, request, &response);
}

// Keys under `prefix` (serializable=false); nullopt if the read failed.
inline std::optional<etcdserverpb::RangeResponse> RangePrefix(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& prefix) {
  auto stub = etcdserverpb::KV::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(5)));
  etcdserverpb::RangeRequest request;
  request.set_key(prefix);
  std::string end = prefix;
  end.back() = static_cast<char>(end.back() + 1);
  request.set_range_end(end);
  etcdserverpb::RangeResponse response;
  if (!stub->Range(&ctx, request, &response).ok()) return std::nullopt;
  return response;
}

// A queue one thread fills and another drains with a deadline.
template <typename T>
class BlockingQueue {
 public:
  void Push(T value) {
    {
      std::lock_guard lock(mu_);
      items_.push_back(std::move(value));
    }
    cv_.notify_all();
  }
  std::optional<T> Pop(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [this] { return !items_.empty(); })) return std::nullopt;
    T value = std::move(items_.front());
    items_.pop_front();
    return value;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<T> items_;
};

}  // namespace epoch::integration
