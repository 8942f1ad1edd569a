#include "epoch/watch/watch_spec.h"

#include "epoch/etcd_errors.h"

namespace epoch::server {

bool WatchSpec::Covers(std::string_view user_key) const {
  if (single_key()) return user_key == key;
  if (user_key < std::string_view(key)) return false;
  return from_key || user_key < std::string_view(range_end);
}

bool WatchSpec::Wants(const mvccpb::Event& event) const {
  return WantsType(event.type()) && Covers(event.kv().key());
}

Result<WatchSpec> ParseWatchCreate(const etcdserverpb::WatchCreateRequest& request) {
  // Checks in etcd's order: the start revision (v3rpc), then the range (mvcc watch stream); the
  // duplicate-ID check needs the stream and is the session's.
  if (request.start_revision() < 0) {
    return Status::InvalidArgument(std::string(etcd_errors::kCompacted.message));
  }
  WatchSpec spec;
  spec.key = request.key().empty() ? std::string(1, '\0') : request.key();
  if (request.range_end() == std::string_view("\0", 1)) {
    spec.from_key = true;
  } else {
    spec.range_end = request.range_end();
    if (!spec.range_end.empty() && spec.key >= spec.range_end) {
      return Status::InvalidArgument(std::string(kWatcherRangeEmpty));
    }
  }
  spec.start_revision = Revision(request.start_revision());
  spec.requested_id = request.watch_id();
  spec.progress_notify = request.progress_notify();
  spec.prev_kv = request.prev_kv();
  spec.fragment = request.fragment();
  for (int filter : request.filters()) {
    // Unknown filter values are ignored, as etcd's FiltersFromRequest does.
    if (filter == etcdserverpb::WatchCreateRequest::NOPUT) spec.no_put = true;
    if (filter == etcdserverpb::WatchCreateRequest::NODELETE) spec.no_delete = true;
  }
  return spec;
}

}  // namespace epoch::server
