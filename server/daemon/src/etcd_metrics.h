// The etcd metrics that etcd's dashboards and alert rules query, rendered from Epoch's own
// measurements with etcd's names, meanings, labels and buckets (etcd 3.4: etcdserver/metrics.go,
// wal/metrics.go, mvcc/metrics.go, mvcc/backend/metrics.go). docs/metrics.md maps each to its
// source here.
//
//   etcd_server_has_leader, etcd_server_is_leader, etcd_server_leader_changes_seen_total
//   etcd_server_proposals_committed_total  gauge: the commit index (as etcd sets it)
//   etcd_server_proposals_applied_total    gauge: the applied index
//   etcd_server_proposals_pending          gauge: this member's proposals not yet committed
//   etcd_server_proposals_failed_total     counter
//   etcd_server_slow_apply_total           applies over 100 ms (RaftDriver::kSlowApply)
//   etcd_server_lease_expired_total, etcd_server_quota_backend_bytes, etcd_server_version
//   etcd_disk_wal_fsync_duration_seconds   WAL fdatasync latency, ExponentialBuckets(0.001, 2, 14)
//   etcd_disk_backend_commit_duration_seconds  the store's batch write, same buckets
//   etcd_mvcc_db_total_size_in_bytes (and etcd_debugging_mvcc_db_total_size_in_bytes, 3.4's
//   name), etcd_mvcc_db_total_size_in_use_in_bytes, etcd_debugging_mvcc_keys_total
//
// Threading: any thread (every source is read through its thread-safe accessors).
#pragma once

#include <cstdint>

#include "epoch/metrics_text.h"
#include "epoch/replication/raft_driver.h"

namespace epoch::server {

class KvStore;

struct EtcdMetricSources {
  DriverStatus driver;
  const KvStore* store = nullptr;
  std::int64_t db_size_bytes = 0;  // what the space quota counts
  std::int64_t quota_bytes = 0;    // --quota-backend-bytes; 0: none
  std::uint64_t leases_expired = 0;
  const Histogram* wal_fsync = nullptr;
};

void RenderEtcdMetrics(MetricsText& m, const EtcdMetricSources& s);

}  // namespace epoch::server
