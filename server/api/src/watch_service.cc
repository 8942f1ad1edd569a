#include "epoch/api/watch_service.h"

#include <spdlog/spdlog.h>

#include "epoch/etcd_errors.h"
#include "epoch/rpc/grpc_util.h"
#include "epoch/state/auth_state.h"
#include "epoch/thread_name.h"
#include "epoch/watch/watch_session.h"

namespace epoch::server {
namespace {

// clientv3's WithRequireLeader metadata (etcd-io/etcd:api/v3rpc/rpctypes/md.go).
bool RequiresLeader(const rpc::CallContext* context) {
  const auto& metadata = context->client_metadata();
  auto [begin, end] = metadata.equal_range("hasleader");
  for (auto it = begin; it != end; ++it) {
    if (std::string_view(it->second.data(), it->second.size()) == "true") return true;
  }
  return false;
}

bool HasLeader(NodeContext& node) { return node.driver().status().leader != raft::kNoNode; }

}  // namespace

// One Watch call. Owns itself from creation until OnDone (self_); the session's write callback
// holds it weakly, so a write racing with the end of the call finds it gone or finishing.
class WatchService::Stream final
    : public rpc::BidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>,
      public std::enable_shared_from_this<Stream> {
 public:
  Stream(WatchService& service, const rpc::CallContext* context)
      : service_(service), context_(context) {}

  void Start() {
    self_ = shared_from_this();
    std::weak_ptr<Stream> weak = self_;
    NodeContext& node = service_.node_;
    session_ = WatchSession::Create(
        service_.hub_,
        WatchSession::Transport{
            [weak](const etcdserverpb::WatchResponse& response, bool more) {
              if (auto stream = weak.lock()) stream->Write(response, more);
            },
            [&node](etcdserverpb::ResponseHeader* header) { node.FillHeader(header); },
            AuthorizeCreate()});
    StartRead(&request_);
  }

  // Ends the call without ever serving it (no leader at open).
  void Refuse(const grpc::Status& status) {
    self_ = shared_from_this();
    {
      std::lock_guard lock(mu_);
      finishing_ = true;
    }
    Finish(status);
  }

  // Ends the call with `status` once the write in flight (if any) completes.
  void End(const grpc::Status& status) {
    if (session_) session_->Close();
    {
      std::lock_guard lock(mu_);
      if (finishing_) return;
      finishing_ = true;
      status_ = status;
      if (writing_) return;  // OnWriteDone finishes
    }
    Finish(status);
  }

  void OnReadDone(bool ok) override {
    // !ok: the client half-closed or the call ended. etcd keeps serving a half-closed stream
    // until the client cancels it (OnCancel), so nothing ends here.
    if (!ok) return;
    if (!session_->Handle(request_)) {
      return End(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                              std::string(kWatchControlQueueExceeded)));
    }
    bool finishing;
    {
      std::lock_guard lock(mu_);
      finishing = finishing_;
    }
    // Inside OnReadDone the call cannot complete yet, so a read racing with End() is harmless;
    // no lock is held in case gRPC runs a reaction inline.
    if (!finishing) StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    grpc::Status finish_with;
    bool finish = false;
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (finishing_) {
        finish = true;
        finish_with = status_;
      }
    }
    if (finish) return Finish(finish_with);
    if (!ok) return End(grpc::Status(grpc::StatusCode::CANCELLED, "watch stream broken"));
    session_->OnWriteDone(true);
  }

  void OnCancel() override { End(grpc::Status(grpc::StatusCode::CANCELLED, "watch canceled")); }

  void OnDone() override {
    if (session_) session_->Close();
    std::shared_ptr<Stream> keep = std::move(self_);  // may destroy *this on return
  }

 private:
  // A create is checked against the caller's read permission on its keys (etcd's
  // isWatchPermitted); the call's context outlives the session.
  std::function<epoch::Status(const etcdserverpb::WatchCreateRequest&)> AuthorizeCreate() {
    const rpc::CallContext* context = context_;
    AuthGate& gate = service_.node_.auth();
    return [context, &gate](const etcdserverpb::WatchCreateRequest& create) {
      return gate.Authorize(*context, [&create](const AuthState& a, std::string_view user) {
        return CheckKeyPermission(a, user, AuthAccess::kRead, create.key(), create.range_end());
      });
    };
  }

  // `more`: the session writes another response right after this one. gRPC then keeps this one
  // in the stream's buffer (it completes at once) and sends the burst in one socket write when
  // the last response, written without the hint, arrives — or when Finish ends the stream.
  void Write(const etcdserverpb::WatchResponse& response, bool more) {
    {
      std::lock_guard lock(mu_);
      if (finishing_) return;  // the session is closed; nothing more goes out
      writing_ = true;
    }
    grpc::WriteOptions options;
    if (more) options.set_buffer_hint();
    StartWrite(&response, options);
  }

  WatchService& service_;
  const rpc::CallContext* const context_;
  std::shared_ptr<Stream> self_;  // set from Start/Refuse until OnDone
  std::shared_ptr<WatchSession> session_;
  etcdserverpb::WatchRequest request_;  // the read in progress

  std::mutex mu_;
  bool writing_ = false;    // a StartWrite without its OnWriteDone; guarded by mu_
  bool finishing_ = false;  // End() was called; guarded by mu_
  grpc::Status status_;     // what End() finishes with; guarded by mu_
};

WatchService::WatchService(NodeContext& node, asio::io_context& io, WatchServiceOptions options)
    : node_(node),
      options_(options),
      io_(io),
      hub_(WatchHub::Create(node.store(), io_.get_executor(), node.read_pool().get_executor(),
                            options.hub)),
      progress_timer_(io_),
      leader_timer_(io_) {
  ScheduleProgressTick();
  ScheduleLeaderCheck();
}

WatchService::~WatchService() { hub_->Detach(); }

rpc::BidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>* WatchService::Watch(
    rpc::CallContext* context) {
  auto stream = std::make_shared<Stream>(*this, context);
  const bool require_leader = RequiresLeader(context);
  if (require_leader && !HasLeader(node_)) {
    stream->Refuse(ToGrpc(etcd_errors::kNoLeader));
    return stream.get();
  }
  stream->Start();
  if (require_leader) {
    std::lock_guard lock(streams_mu_);
    std::erase_if(leader_streams_, [](const std::weak_ptr<Stream>& s) { return s.expired(); });
    leader_streams_.push_back(stream);
  }
  return stream.get();
}

void WatchService::ScheduleProgressTick() {
  progress_timer_.expires_after(options_.progress_interval);
  progress_timer_.async_wait([this](std::error_code ec) {
    if (ec) return;
    hub_->TickProgress();
    ScheduleProgressTick();
  });
}

void WatchService::ScheduleLeaderCheck() {
  leader_timer_.expires_after(options_.leader_check_interval);
  leader_timer_.async_wait([this](std::error_code ec) {
    if (ec) return;
    CheckLeader();
    // Between two applies on the driver strand, the store and the published revisions agree
    // unless a snapshot replaced the store: then watchers re-read history.
    // Weakly held: a post still queued when the driver stops must not keep the hub (and its
    // strand on io_) alive past this service.
    node_.driver().Post([weak = std::weak_ptr<WatchHub>(hub_)] {
      if (auto hub = weak.lock()) hub->Resync();
    });
    ScheduleLeaderCheck();
  });
}

void WatchService::CheckLeader() {
  leaderless_checks_ = HasLeader(node_) ? 0 : leaderless_checks_ + 1;
  if (leaderless_checks_ < options_.leaderless_checks_max) return;
  std::vector<std::shared_ptr<Stream>> streams;
  {
    std::lock_guard lock(streams_mu_);
    for (const auto& weak : leader_streams_) {
      if (auto s = weak.lock()) streams.push_back(std::move(s));
    }
    leader_streams_.clear();
  }
  if (!streams.empty()) {
    spdlog::warn("node={:x} no leader for {} checks: ending {} watch streams that require one",
                 node_.config().self_id().value(), leaderless_checks_, streams.size());
  }
  for (const auto& s : streams) s->End(ToGrpc(etcd_errors::kNoLeader));
}

void WatchService::Register(rpc::Server& server) {
  using Async = etcdserverpb::Watch::AsyncService;
  server.Bidi(this, &Async::RequestWatch, [this](rpc::CallContext* c) { return Watch(c); });
}

void WatchService::RenderMetrics(MetricsText& m) const {
  const WatchHubStats watch = hub_->stats();
  m.Gauge("epoch_watchers", "Watchers registered on this node.", watch.watchers);
  m.Counter("epoch_watch_fallbacks_total", "Watchers that fell back to reading history.",
            watch.fallbacks);
  m.Counter("epoch_watch_history_reads_total", "History reads by catching-up watchers.",
            watch.history_reads);
  m.Counter("epoch_watch_creates_refused_total",
            "Watch creates refused: the stream held --max-watchers-per-stream watchers.",
            watch.watchers_refused);
  m.Counter("epoch_watch_streams_cut_total",
            "Watch streams ended: more than --watch-control-queue-max replies unread.",
            watch.streams_cut);
}

}  // namespace epoch::server
