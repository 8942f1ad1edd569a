#include "epoch/api/txn_read_throttle.h"

#include "auth_failure_limiter.h"
#include "epoch/etcd_errors.h"

namespace epoch::server {

std::string TxnReadThrottle::KeyOf(const rpc::CallContext& ctx) const {
  return PeerHost(peers_.Resolve(ctx.peer()));
}

bool TxnReadThrottle::Admit(const std::string& key) {
  if (limiter_.Admit(key, FailureLimiter::Clock::now())) return true;
  throttled_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void TxnReadThrottle::Finish(const std::string& key, const Status& precheck) {
  limiter_.Finish(key, precheck.Is(ErrorId::kTxnReadTooLarge), FailureLimiter::Clock::now());
}

void TxnReadThrottle::RenderMetrics(MetricsText& m) const {
  m.Counter("epoch_txn_read_limit_throttled_total",
            "Txns with writes refused without their read count: their client address had too "
            "many refused for --max-txn-read-keys (--txn-read-refusal-burst).",
            throttled_.load(std::memory_order_relaxed));
}

}  // namespace epoch::server
