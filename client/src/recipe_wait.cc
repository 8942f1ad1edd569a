#include "recipe_wait.h"

#include <condition_variable>
#include <mutex>

#include "epoch/client/backoff.h"

namespace epoch::client::recipe {
namespace {

// Watches `key` from `revision` until a DELETE event.
Status WaitDelete(Client& client, const std::string& key, std::int64_t revision,
                  const CallOptions& call) {
  Result<std::unique_ptr<WatchStream>> watch = client.OpenWatch(call.stop);
  if (!watch.ok()) return watch.status();
  etcdserverpb::WatchCreateRequest create;
  create.set_key(key);
  create.set_start_revision(revision);
  EPOCH_RETURN_IF_ERROR((*watch)->Create(create));
  while (true) {
    Result<etcdserverpb::WatchResponse> response = (*watch)->Receive();
    if (!response.ok()) return response.status();
    if (response->canceled()) {
      return Status::Unavailable("watch on " + key + " canceled: " + response->cancel_reason());
    }
    for (const auto& event : response->events()) {
      if (event.type() == mvccpb::Event::DELETE) return Status::Ok();
    }
  }
}

}  // namespace

etcdserverpb::RangeRequest OwnerQuery(const std::string& prefix,
                                      etcdserverpb::RangeRequest::SortOrder order) {
  etcdserverpb::RangeRequest range;
  range.set_key(prefix);
  range.set_range_end(PrefixRangeEnd(prefix));
  range.set_sort_target(etcdserverpb::RangeRequest::CREATE);
  range.set_sort_order(order);
  range.set_limit(1);
  return range;
}

void SleepFor(std::chrono::nanoseconds d, const std::stop_token& stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  cv.wait_for(lock, stop, d, [] { return false; });
}

Status WaitOlderDeletes(Client& client, const std::string& prefix, std::int64_t max_create_revision,
                        const CallOptions& call, const char* cancelled_message) {
  Backoff backoff(client.options().retry, static_cast<std::uint64_t>(max_create_revision));
  while (!call.stop.stop_requested()) {
    etcdserverpb::RangeRequest range = OwnerQuery(prefix, etcdserverpb::RangeRequest::DESCEND);
    range.set_max_create_revision(max_create_revision);
    Result<etcdserverpb::RangeResponse> earlier = client.Range(range, call);
    if (!earlier.ok()) return earlier.status();
    if (earlier->kvs_size() == 0) return Status::Ok();  // nobody queued before us
    Status waited = WaitDelete(client, earlier->kvs(0).key(), earlier->header().revision(), call);
    if (!waited.ok()) {
      if (call.stop.stop_requested()) return waited;
      // The stream broke (member restart, compaction): look again after a pause.
      SleepFor(backoff.NextDelay(), call.stop);
    } else {
      backoff.Reset();
    }
  }
  return Status::Aborted(cancelled_message);
}

}  // namespace epoch::client::recipe
