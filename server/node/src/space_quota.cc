#include "epoch/node/space_quota.h"

#include <spdlog/spdlog.h>

#include "epoch/etcd_errors.h"
#include "epoch/state/alarms.h"

namespace epoch::server {
namespace {

constexpr auto kRaiseTimeout = std::chrono::seconds(5);

std::int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

SpaceQuota::SpaceQuota(NodeContext& node, std::int64_t quota_bytes,
                       std::chrono::milliseconds check_interval)
    : node_(node),
      quota_bytes_(quota_bytes > 0 ? quota_bytes : 0),
      checks_(node.read_pool().get_executor(), check_interval, [this] {
        Check();
        return true;
      }) {}

SpaceQuota::~SpaceQuota() { Stop(); }

void SpaceQuota::Start() {
  if (quota_bytes_ > 0) checks_.Start();
}

void SpaceQuota::Stop() { checks_.Stop(); }

std::int64_t SpaceQuota::SizeBytes() {
  const std::int64_t now = NowNs();
  std::int64_t at = sampled_at_ns_.load(std::memory_order_relaxed);
  // One caller per interval samples; the others use the last sample.
  if (now - at >= kSampleEveryNs &&
      sampled_at_ns_.compare_exchange_strong(at, now, std::memory_order_relaxed)) {
    size_bytes_.store(node_.store().ApproximateSizeBytes(), std::memory_order_relaxed);
  }
  return size_bytes_.load(std::memory_order_relaxed);
}

std::int64_t SpaceQuota::SampleNow() {
  sampled_at_ns_.store(NowNs(), std::memory_order_relaxed);
  const std::int64_t size = node_.store().ApproximateSizeBytes();
  size_bytes_.store(size, std::memory_order_relaxed);
  return size;
}

bool SpaceQuota::Admit(const v1::InternalRequest& request) {
  if (quota_bytes_ == 0) return true;
  const std::size_t cost = SpaceCost(request);
  if (cost == 0) return true;
  const auto fits = [&](std::int64_t size) {
    return size + static_cast<std::int64_t>(cost) < quota_bytes_;
  };
  if (fits(SizeBytes())) return true;
  // Refused and alarmed only on a fresh size: a sample from before a defragmentation must not
  // raise the alarm again right after the operator cleared it.
  const std::int64_t size = SampleNow();
  if (fits(size)) return true;
  Raise(size);
  return false;
}

void SpaceQuota::Check() {
  if (SizeBytes() < quota_bytes_) return;
  const std::int64_t size = SampleNow();
  if (size >= quota_bytes_) Raise(size);
}

void SpaceQuota::Raise(std::int64_t size) {
  const StoreAlarm mine{node_.config().self_id().value(), etcdserverpb::NOSPACE};
  if (HasAlarm(node_.store().Alarms(), mine)) return;
  if (raising_.exchange(true)) return;
  spdlog::warn(
      "name={} store size {} bytes reached the space quota ({} bytes, "
      "--quota-backend-bytes): raising the NOSPACE alarm",
      node_.config().name, size, quota_bytes_);
  v1::InternalRequest request;
  etcdserverpb::AlarmRequest* alarm = request.mutable_alarm();
  alarm->set_action(etcdserverpb::AlarmRequest::ACTIVATE);
  alarm->set_memberid(mine.member);
  alarm->set_alarm(mine.type);
  node_.Write(std::move(request), std::chrono::system_clock::now() + kRaiseTimeout,
              [this](const Status& s, const v1::InternalResponse&) {
                if (!s.ok()) {
                  spdlog::warn("name={} raising the NOSPACE alarm: {} (tried again later)",
                               node_.config().name, s.ToString());
                }
                raising_.store(false);
              });
}

void SpaceQuota::RenderMetrics(MetricsText& m) {
  m.Gauge("epoch_kv_db_size_bytes", "Approximate size of the store (what the space quota counts).",
          SizeBytes());
  m.Gauge("epoch_kv_quota_bytes", "The space quota (--quota-backend-bytes); 0: none.",
          quota_bytes_);
}

}  // namespace epoch::server
