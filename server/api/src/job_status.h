// Jobs.Status and Jobs.ListDeadLetters: reads of a job queue's keys (job_layout.h), all at the
// revision of the first one, so one answer describes one state of the store.
//
// Threading: call after a linearizable read barrier, on any thread; reads only.
#pragma once

#include <cstdint>
#include <string>

#include "epoch/state/kv_store.h"
#include "epoch/v1/epoch.pb.h"
#include "job_layout.h"

namespace epoch::server {

// Fills `out` (not its header's cluster fields) with the job's state.
Status ReadJobStatus(const KvStore& store, const jobs::QueueKeys& keys, v1::JobStatusResponse* out);
// Every job under `prefix` dlq/ (at most `limit`, 0: all), in key order.
Status ReadDeadLetters(const KvStore& store, const std::string& prefix, std::int64_t limit,
                       v1::ListDeadLettersResponse* out);

}  // namespace epoch::server
