// The Watch stream over a raw gRPC stub, for what etcdctl does not show: several watchers on one
// stream (IDs, created replies in order, the duplicate-ID refusal), RequestProgress (watch_id -1),
// cancel, fragmented large revisions, and a half-closed stream that keeps delivering.
#include <fmt/format.h>

#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "support.h"

namespace epoch::integration {
namespace {

namespace pb = etcdserverpb;

// One Watch call with a reader thread, so the test can wait for the next response with a
// deadline.
class WatchClient {
 public:
  WatchClient(TestCluster& cluster, int node) : stub_(pb::Watch::NewStub(cluster.Channel(node))) {
    stream_ = stub_->Watch(&context_);
    reader_ = std::thread([this] {
      pb::WatchResponse response;
      while (stream_->Read(&response)) {
        std::lock_guard lock(mu_);
        responses_.push_back(response);
        cv_.notify_all();
      }
      std::lock_guard lock(mu_);
      ended_ = true;
      cv_.notify_all();
    });
  }
  ~WatchClient() {
    context_.TryCancel();
    reader_.join();
    (void)stream_->Finish();
  }

  void Send(const pb::WatchRequest& request) { REQUIRE(stream_->Write(request)); }
  void Create(const pb::WatchCreateRequest& create) {
    pb::WatchRequest request;
    *request.mutable_create_request() = create;
    Send(request);
  }
  void WritesDone() { REQUIRE(stream_->WritesDone()); }

  // The next response, or nullopt after `timeout`.
  std::optional<pb::WatchResponse> Next(
      std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock lock(mu_);
    if (!cv_.wait_for(lock, timeout, [this] { return !responses_.empty() || ended_; })) {
      return std::nullopt;
    }
    if (responses_.empty()) return std::nullopt;
    pb::WatchResponse r = std::move(responses_.front());
    responses_.pop_front();
    return r;
  }
  pb::WatchResponse MustNext() {
    std::optional<pb::WatchResponse> r = Next();
    REQUIRE(r.has_value());
    return *r;
  }

 private:
  std::unique_ptr<pb::Watch::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream_;
  std::thread reader_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<pb::WatchResponse> responses_;  // guarded by mu_
  bool ended_ = false;                       // guarded by mu_
};

pb::WatchCreateRequest Create(const std::string& key, const std::string& range_end = {},
                              std::int64_t id = 0) {
  pb::WatchCreateRequest c;
  c.set_key(key);
  c.set_range_end(range_end);
  c.set_watch_id(id);
  return c;
}

std::int64_t MustPut(TestCluster& cluster, const std::string& key, const std::string& value) {
  auto kv = pb::KV::NewStub(cluster.Channel(0));
  pb::PutResponse response;
  grpc::Status s = Put(*kv, key, value, &response);
  INFO(s.error_message());
  REQUIRE(s.ok());
  return response.header().revision();
}

TEST_CASE("one gRPC stream, several watchers: IDs, order, progress, cancel",
          "[integration][watch]") {
  auto cluster = StartCluster();
  WatchClient w(*cluster, 1);
  w.Create(Create("g/a"));                        // auto: 0
  w.Create(Create("g/", "g0", 7));                // explicit 7
  w.Create(Create("g/b", std::string(1, '\0')));  // auto: 1
  w.Create(Create("g/", "g0", 7));                // duplicate
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 4; ++i) {
    pb::WatchResponse r = w.MustNext();
    CHECK(r.created());
    ids.push_back(r.watch_id());
    if (i == 3) {
      CHECK(r.canceled());
      CHECK(r.cancel_reason() == "mvcc: duplicate watch ID provided on the WatchStream");
    }
  }
  CHECK(ids == std::vector<std::int64_t>{0, 7, 1, -1});

  const std::int64_t rev_a = MustPut(*cluster, "g/a", "1");
  std::map<std::int64_t, std::int64_t> event_rev;  // watch id -> revision
  for (int i = 0; i < 2; ++i) {
    pb::WatchResponse r = w.MustNext();
    REQUIRE(r.events_size() == 1);
    event_rev[r.watch_id()] = r.events(0).kv().mod_revision();
  }
  CHECK(event_rev == std::map<std::int64_t, std::int64_t>{{0, rev_a}, {7, rev_a}});

  pb::WatchRequest progress;
  progress.mutable_progress_request();
  w.Send(progress);
  pb::WatchResponse p = w.MustNext();
  CHECK(p.watch_id() == -1);
  CHECK(p.events_size() == 0);
  CHECK(p.header().revision() == rev_a);

  pb::WatchRequest cancel;
  cancel.mutable_cancel_request()->set_watch_id(7);
  w.Send(cancel);
  pb::WatchResponse c = w.MustNext();
  CHECK((c.canceled() && c.watch_id() == 7 && !c.created()));

  const std::int64_t rev_b = MustPut(*cluster, "g/b", "2");
  pb::WatchResponse b = w.MustNext();
  CHECK(b.watch_id() == 1);
  REQUIRE(b.events_size() == 1);
  CHECK(b.events(0).kv().mod_revision() == rev_b);
  CHECK_FALSE(w.Next(std::chrono::milliseconds(300)).has_value());  // nothing for 7 any more
}

TEST_CASE("a revision larger than a response arrives in fragments when asked",
          "[integration][watch]") {
  auto cluster = StartCluster();
  WatchClient w(*cluster, 0);
  pb::WatchCreateRequest create = Create("f/", "f0");
  create.set_fragment(true);
  w.Create(create);
  REQUIRE(w.MustNext().created());
  // One Txn of 6 x 200 KB: one revision of ~1.2 MB, above the 1 MiB response size.
  pb::TxnRequest txn;
  for (int i = 0; i < 6; ++i) {
    pb::PutRequest* put = txn.add_success()->mutable_request_put();
    put->set_key(fmt::format("f/{}", i));
    put->set_value(std::string(200 * 1024, static_cast<char>('a' + i)));
  }
  auto kv = pb::KV::NewStub(cluster->Channel(0));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  pb::TxnResponse txn_response;
  grpc::Status s = kv->Txn(&ctx, txn, &txn_response);
  INFO(s.error_message());
  REQUIRE(s.ok());
  int events = 0, parts = 0;
  bool last_fragment = true;
  while (last_fragment) {
    pb::WatchResponse r = w.MustNext();
    ++parts;
    events += r.events_size();
    for (const auto& e : r.events())
      CHECK(e.kv().mod_revision() == txn_response.header().revision());
    last_fragment = r.fragment();
  }
  CHECK(parts >= 2);
  CHECK(events == 6);
}

TEST_CASE("a half-closed watch stream keeps delivering events, as etcd's does",
          "[integration][watch]") {
  auto cluster = StartCluster();
  WatchClient w(*cluster, 2);
  w.Create(Create("h/k"));
  REQUIRE(w.MustNext().created());
  w.WritesDone();
  const std::int64_t rev = MustPut(*cluster, "h/k", "v");
  pb::WatchResponse r = w.MustNext();
  REQUIRE(r.events_size() == 1);
  CHECK(r.events(0).kv().mod_revision() == rev);
}

}  // namespace
}  // namespace epoch::integration
