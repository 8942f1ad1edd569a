// What the etcd concurrency recipes (Mutex, Election) share on the client side: the owner query
// and step 4, "wait until every key created before mine under the prefix is deleted"
// (clientv3 concurrency.waitDeletes).
//
// Threading: as Client (any thread); one call per waiter.
#pragma once

#include <chrono>
#include <cstdint>
#include <stop_token>
#include <string>

#include "epoch/client/client.h"
#include "epoch/status.h"

namespace epoch::client::recipe {

// Range(prefix) sorted by create_revision, one key: clientv3 WithFirstCreate / WithLastCreate.
etcdserverpb::RangeRequest OwnerQuery(const std::string& prefix,
                                      etcdserverpb::RangeRequest::SortOrder order);

// Sleeps `d` unless `stop` is requested first.
void SleepFor(std::chrono::nanoseconds d, const std::stop_token& stop);

// Returns once no key under `prefix` has create_revision <= max_create_revision. A broken watch
// stream (member restart, compaction) is retried after a backoff pause; a stop request ends the
// wait with Aborted(`cancelled_message`).
Status WaitOlderDeletes(Client& client, const std::string& prefix, std::int64_t max_create_revision,
                        const CallOptions& call, const char* cancelled_message);

}  // namespace epoch::client::recipe
