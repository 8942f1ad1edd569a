#include "etcd_metrics.h"

#include "epoch/api/maintenance_service.h"
#include "epoch/state/kv_store.h"

namespace epoch::server {
namespace {

// etcd's default --quota-backend-bytes (2 GiB), which etcd reports when none is set.
constexpr std::int64_t kEtcdDefaultQuotaBytes = std::int64_t{2} << 30;

void RenderServer(MetricsText& m, const EtcdMetricSources& s) {
  const DriverStatus& d = s.driver;
  m.Gauge("etcd_server_has_leader", "Whether or not a leader exists. 1 is existence, 0 is not.",
          d.leader == raft::kNoNode ? 0 : 1);
  m.Gauge("etcd_server_is_leader", "Whether or not this member is a leader. 1 if is, 0 otherwise.",
          d.role == raft::Role::kLeader ? 1 : 0);
  m.Counter("etcd_server_leader_changes_seen_total", "The number of leader changes seen.",
            d.leader_changes);
  m.Counter("etcd_server_slow_apply_total",
            "The total number of slow apply requests (likely overloaded from slow disk).",
            d.slow_applies);
  m.Gauge("etcd_server_proposals_committed_total",
          "The total number of consensus proposals committed.", d.commit.value());
  m.Gauge("etcd_server_proposals_applied_total", "The total number of consensus proposals applied.",
          d.applied.value());
  m.Gauge("etcd_server_proposals_pending", "The current number of pending proposals to commit.",
          d.proposals_pending);
  m.Counter("etcd_server_proposals_failed_total", "The total number of failed proposals seen.",
            d.proposals_failed);
  m.Counter("etcd_server_lease_expired_total", "The total number of expired leases.",
            s.leases_expired);
  m.Gauge("etcd_server_quota_backend_bytes", "Current backend storage quota size in bytes.",
          s.quota_bytes > 0 ? s.quota_bytes : kEtcdDefaultQuotaBytes);
  m.Header("etcd_server_version", "gauge",
           "Which version is running. 1 for 'server_version' label with current version.");
  m.Sample("etcd_server_version", {{"server_version", kEtcdApiVersion}}, 1);
}

void RenderStorage(MetricsText& m, const EtcdMetricSources& s) {
  m.Histogram("etcd_disk_wal_fsync_duration_seconds",
              "The latency distributions of fsync called by WAL.", *s.wal_fsync);
  m.Histogram("etcd_disk_backend_commit_duration_seconds",
              "The latency distributions of commit called by backend.", s.store->commit_latency());
  m.Gauge("etcd_mvcc_db_total_size_in_bytes",
          "Total size of the underlying database physically allocated in bytes.", s.db_size_bytes);
  m.Gauge("etcd_debugging_mvcc_db_total_size_in_bytes",
          "Total size of the underlying database physically allocated in bytes.", s.db_size_bytes);
  m.Gauge("etcd_mvcc_db_total_size_in_use_in_bytes",
          "Total size of the underlying database logically in use in bytes.",
          s.store->ApproximateLiveBytes());
  m.Gauge("etcd_debugging_mvcc_keys_total", "Total number of keys.",
          s.store->IndexSizeNow().live_keys);
  const CompactionMetrics& c = s.store->compaction_metrics();
  m.Histogram("etcd_debugging_mvcc_index_compaction_pause_duration_milliseconds",
              "Bucketed histogram of index compaction pause duration.", c.index_pause);
  m.Histogram("etcd_debugging_mvcc_db_compaction_pause_duration_milliseconds",
              "Bucketed histogram of db compaction pause duration.", c.batch_pause);
  m.Histogram("etcd_debugging_mvcc_db_compaction_total_duration_milliseconds",
              "Bucketed histogram of db compaction total duration.", c.pass_total);
  m.Counter("etcd_debugging_mvcc_db_compaction_keys_total", "Total number of db keys compacted.",
            c.records_deleted.load());
}

}  // namespace

void RenderEtcdMetrics(MetricsText& m, const EtcdMetricSources& s) {
  RenderServer(m, s);
  RenderStorage(m, s);
}

}  // namespace epoch::server
