#include "epoch/lease/lease_keepalive_batcher.h"

#include <cassert>
#include <utility>

namespace epoch::server {

void KeepAliveBatcher::Add(LeaseId id, etcdserverpb::ResponseHeader header, KeepAliveCallback done,
                           TimePoint now) {
  if (waiters_.empty()) first_arrival_ = now;
  if (id_set_.insert(id).second) ids_.push_back(id);
  waiters_.push_back(Waiter{id, std::move(header), std::move(done)});
}

bool KeepAliveBatcher::FlushDue(TimePoint now) const {
  if (waiters_.empty()) return false;
  return ids_.size() >= max_ids_ || now - first_arrival_ >= window_;
}

KeepAliveBatcher::Batch KeepAliveBatcher::Take() {
  Batch batch{std::move(ids_), std::move(waiters_)};
  ids_.clear();
  id_set_.clear();
  waiters_.clear();
  return batch;
}

RenewDecision LeaseInFlight::Decide(LeaseId id, std::optional<std::int64_t> deadline_cluster_ms,
                                    std::int64_t now_cluster_ms) const {
  if (!deadline_cluster_ms) return RenewDecision::kUnknown;
  // A lease past its deadline is expired even if its revoke has not been proposed yet: renewing
  // it would race the revoke (header comment). etcd answers such keep-alives with TTL 0 too.
  if (*deadline_cluster_ms <= now_cluster_ms || expiries_.count(id) > 0) {
    return RenewDecision::kExpired;
  }
  return RenewDecision::kRenew;
}

void LeaseInFlight::RenewalProposed(LeaseId id) { ++renewals_[id]; }

void LeaseInFlight::RenewalDone(LeaseId id) {
  auto it = renewals_.find(id);
  if (it == renewals_.end()) return;  // from before Reset()
  assert(it->second > 0);
  if (--it->second == 0) renewals_.erase(it);
}

std::vector<LeaseId> LeaseInFlight::SelectExpiries(const std::vector<LeaseId>& expired) {
  std::vector<LeaseId> out;
  for (LeaseId id : expired) {
    if (renewals_.count(id) > 0) continue;  // re-checked once the renewal applied
    if (!expiries_.insert(id).second) continue;
    out.push_back(id);
  }
  return out;
}

void LeaseInFlight::ExpiryDone(LeaseId id) { expiries_.erase(id); }

void LeaseInFlight::Reset() {
  renewals_.clear();
  expiries_.clear();
}

}  // namespace epoch::server
