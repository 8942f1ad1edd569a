// Test helpers for the watch tests: a KvStore in a temporary directory whose applied entries are
// published to a WatchHub only when the test says so, separate io_contexts for the hub's
// dispatch rounds and for history reads (so a test chooses their interleaving), and FakeStream,
// a WatchSession whose writes complete only when the test acknowledges them.
#pragma once

#include <catch2/catch.hpp>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "epoch/state/kv_store.h"
#include "epoch/test_support/temp_dir.h"
#include "epoch/watch/watch_hub.h"
#include "epoch/watch/watch_session.h"

namespace epoch::server::watch_testing {

namespace pb = etcdserverpb;

// A store, a hub on it, and the two executors the hub runs on, all driven by the test thread.
class WatchFixture {
 public:
  explicit WatchFixture(WatchHubOptions options = {}, KvStoreOptions store_options = {}) {
    Result<std::unique_ptr<KvStore>> store = KvStore::Open(dir_.Sub("kv"), store_options);
    INFO(store.status().ToString());
    REQUIRE(store.ok());
    store_ = std::move(*store);
    hub_ = WatchHub::Create(*store_, dispatch_io_.get_executor(), read_io_.get_executor(), options);
  }
  ~WatchFixture() { hub_->Detach(); }

  KvStore& store() { return *store_; }
  WatchHub& hub() { return *hub_; }
  const std::shared_ptr<WatchHub>& hub_ptr() { return hub_; }

  // Applies `request` as the next log entry; publishes its events unless `publish` is false.
  ApplyResult Apply(v1::InternalRequest request, bool publish = true) {
    Result<ApplyResult> r = store_->Apply(next_index_, request);
    INFO(r.status().ToString());
    REQUIRE(r.ok());
    next_index_ = next_index_.Next();
    if (publish) Publish(*r);
    return std::move(*r);
  }
  void Publish(const ApplyResult& r) { hub_->Publish(r.revision, r.events); }

  ApplyResult Put(const std::string& key, const std::string& value, bool publish = true) {
    v1::InternalRequest request;
    request.mutable_put()->set_key(key);
    request.mutable_put()->set_value(value);
    return Apply(std::move(request), publish);
  }
  ApplyResult Delete(const std::string& key, const std::string& range_end = {},
                     bool publish = true) {
    v1::InternalRequest request;
    request.mutable_delete_range()->set_key(key);
    request.mutable_delete_range()->set_range_end(range_end);
    return Apply(std::move(request), publish);
  }
  // One Txn putting every (key, value): all its events share one revision.
  ApplyResult PutAll(const std::vector<std::pair<std::string, std::string>>& kvs,
                     bool publish = true) {
    v1::InternalRequest request;
    for (const auto& [k, v] : kvs) {
      pb::PutRequest* put = request.mutable_txn()->add_success()->mutable_request_put();
      put->set_key(k);
      put->set_value(v);
    }
    return Apply(std::move(request), publish);
  }
  void Compact(std::int64_t revision) {
    v1::InternalRequest request;
    request.mutable_compaction()->set_revision(revision);
    ApplyResult r = Apply(std::move(request));
    INFO(r.status.ToString());
    REQUIRE(r.status.ok());
  }

  // Runs pending dispatch rounds / history reads (each may schedule more of the same kind).
  std::size_t RunDispatch() { return Poll(dispatch_io_); }
  std::size_t RunReads() { return Poll(read_io_); }
  // Runs exactly one pending history read, if any.
  std::size_t RunOneRead() {
    read_io_.restart();
    return read_io_.poll_one();
  }

 private:
  static std::size_t Poll(asio::io_context& io) {
    io.restart();
    return io.poll();
  }

  test_support::TempDir dir_{"epoch-watch"};
  std::unique_ptr<KvStore> store_;
  LogIndex next_index_{1};
  asio::io_context dispatch_io_;
  asio::io_context read_io_;
  std::shared_ptr<WatchHub> hub_;
};

// `response` as the client reads it: serialized and parsed again (a session's responses carry
// their events pre-serialized, as unknown fields, until then); nullopt if that fails or leaves
// a field the client would not know.
inline std::optional<pb::WatchResponse> OverTheWire(const pb::WatchResponse& response) {
  pb::WatchResponse parsed;
  if (!parsed.ParseFromString(response.SerializeAsString())) return std::nullopt;
  if (!parsed.GetReflection()->GetUnknownFields(parsed).empty()) return std::nullopt;
  return parsed;
}

// One watch stream whose writes complete only when acknowledged (Ack/AckAll), so a test can be
// a fast client or a stalled one. Like gRPC with a buffer hint, a write started with `more` is
// only buffered: it reaches the client when the next write without it is acknowledged
// (unflushed() counts the ones still buffered).
class FakeStream {
 public:
  explicit FakeStream(WatchFixture& fixture) : fixture_(fixture) {
    session_ = WatchSession::Create(
        fixture.hub_ptr(),
        WatchSession::Transport{[this](const pb::WatchResponse& r, bool more) {
                                  REQUIRE_FALSE(in_flight_.has_value());  // one write at a time
                                  in_flight_ = OverTheWire(r);
                                  REQUIRE(in_flight_.has_value());
                                  in_flight_more_ = more;
                                  if (more) ++hinted_writes_;
                                },
                                [](pb::ResponseHeader* h) {
                                  h->set_cluster_id(7);
                                  h->set_member_id(9);
                                },
                                {}});
  }
  ~FakeStream() { session_->Close(); }

  WatchSession& session() { return *session_; }

  // Whether the session keeps the stream (WatchSession::Handle).
  bool Send(const pb::WatchRequest& request) { return session_->Handle(request); }
  void Create(const pb::WatchCreateRequest& create) {
    pb::WatchRequest request;
    *request.mutable_create_request() = create;
    Send(request);
  }
  void Cancel(std::int64_t id) {
    pb::WatchRequest request;
    request.mutable_cancel_request()->set_watch_id(id);
    Send(request);
  }
  void RequestProgress() {
    pb::WatchRequest request;
    request.mutable_progress_request();
    Send(request);
  }

  // Completes the write in flight; false when there is none.
  bool Ack() {
    if (!in_flight_) return false;
    received_.push_back(std::move(*in_flight_));
    in_flight_.reset();
    unflushed_ = in_flight_more_ ? unflushed_ + 1 : 0;
    session_->OnWriteDone(true);
    return true;
  }
  void AckAll() {
    while (Ack()) {
    }
  }
  [[nodiscard]] bool writing() const { return in_flight_.has_value(); }
  // Responses acknowledged but still in the transport's buffer: written with `more` and not yet
  // followed by a write without it.
  [[nodiscard]] std::size_t unflushed() const { return unflushed_; }
  // Writes started with `more`.
  [[nodiscard]] std::size_t hinted_writes() const { return hinted_writes_; }

  // Everything the client has received so far, in order; Take() also forgets it.
  [[nodiscard]] const std::vector<pb::WatchResponse>& received() const { return received_; }
  std::vector<pb::WatchResponse> Take() { return std::exchange(received_, {}); }

 private:
  WatchFixture& fixture_;
  std::shared_ptr<WatchSession> session_;
  std::optional<pb::WatchResponse> in_flight_;
  bool in_flight_more_ = false;
  std::vector<pb::WatchResponse> received_;
  std::size_t unflushed_ = 0;
  std::size_t hinted_writes_ = 0;
};

// Runs the hub, the reads and every stream's writes until nothing moves.
inline void Settle(WatchFixture& fixture, const std::vector<FakeStream*>& streams) {
  for (int i = 0; i < 100000; ++i) {
    std::size_t work = fixture.RunDispatch() + fixture.RunReads();
    for (FakeStream* s : streams) {
      while (s->Ack()) ++work;
    }
    if (work == 0) {
      // Settled: whatever was written with the buffer hint has been flushed by a later write.
      for (FakeStream* s : streams) CHECK(s->unflushed() == 0);
      return;
    }
  }
  FAIL("watch fixture did not settle");
}

inline pb::WatchCreateRequest CreateReq(const std::string& key, const std::string& range_end = {},
                                        std::int64_t start_revision = 0) {
  pb::WatchCreateRequest c;
  c.set_key(key);
  c.set_range_end(range_end);
  c.set_start_revision(start_revision);
  return c;
}

// (watch_id, revision, type, key) of every event received, in order.
struct SeenEvent {
  std::int64_t watch_id;
  std::int64_t revision;
  mvccpb::Event::EventType type;
  std::string key;
  std::string value;
  bool has_prev_kv;
  friend bool operator==(const SeenEvent&, const SeenEvent&) = default;
};

inline std::vector<SeenEvent> EventsOf(const std::vector<pb::WatchResponse>& responses,
                                       std::optional<std::int64_t> watch_id = std::nullopt) {
  std::vector<SeenEvent> out;
  for (const pb::WatchResponse& r : responses) {
    if (watch_id && r.watch_id() != *watch_id) continue;
    for (const mvccpb::Event& e : r.events()) {
      out.push_back({r.watch_id(), e.kv().mod_revision(), e.type(), e.kv().key(), e.kv().value(),
                     e.has_prev_kv()});
    }
  }
  return out;
}

inline std::vector<std::int64_t> RevisionsOf(const std::vector<SeenEvent>& events) {
  std::vector<std::int64_t> out;
  for (const SeenEvent& e : events) out.push_back(e.revision);
  return out;
}

}  // namespace epoch::server::watch_testing
