#include "auth_failure_limiter.h"

namespace epoch::server {

std::string PeerHost(std::string_view grpc_peer) {
  const std::size_t scheme = grpc_peer.find(':');
  if (scheme == std::string_view::npos) return std::string(grpc_peer);
  const std::size_t bracket = grpc_peer.find(']', scheme);
  const std::size_t port = grpc_peer.rfind(':');
  if (bracket != std::string_view::npos) return std::string(grpc_peer.substr(0, bracket + 1));
  if (port == scheme || grpc_peer.starts_with("unix:")) return std::string(grpc_peer);
  return std::string(grpc_peer.substr(0, port));
}

bool AuthFailureLimiter::Admit(std::string_view user, std::string_view host,
                               Clock::time_point now) {
  std::lock_guard lock(mu_);
  FailureBuckets::Bucket* u = users_.Find(user, now);
  FailureBuckets::Bucket* h = hosts_.Find(host, now);
  if (FailureBuckets::Refuses(u, now) || FailureBuckets::Refuses(h, now)) return false;
  FailureBuckets::Take(u);
  FailureBuckets::Take(h);
  return true;
}

void AuthFailureLimiter::Finish(std::string_view user, std::string_view host, bool failed,
                                Clock::time_point now) {
  std::lock_guard lock(mu_);
  FailureBuckets::Bucket* u = users_.Find(user, now);
  FailureBuckets::Bucket* h = hosts_.Find(host, now);
  users_.Finish(u, failed, now);
  hosts_.Finish(h, failed, now);
  if (!failed) FailureBuckets::Forgive(u);
}

}  // namespace epoch::server
