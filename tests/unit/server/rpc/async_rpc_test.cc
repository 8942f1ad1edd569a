// rpc::Server (server/rpc/include/epoch/rpc/async_rpc.h): gRPC's async API behind
// callback-API-shaped reactors. Each case runs a real grpc::Server on loopback with a test service
// and a stock client.
#include "epoch/rpc/async_rpc.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "epoch/etcd_errors.h"
#include "epoch/test_support/eventually.h"
#include "etcdserverpb/rpc.grpc.pb.h"

namespace epoch::server {

using epoch::test_support::Eventually;
namespace {

using namespace std::chrono_literals;

// Owns a grpc::Server on an ephemeral loopback port with `register_fn`'s methods.
class TestServer {
 public:
  template <typename Register>
  explicit TestServer(Register register_fn) : rpc_(1) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    register_fn(rpc_);
    rpc_.AddTo(builder);
    server_ = builder.BuildAndStart();
    REQUIRE(server_);
    rpc_.Start(&client_queue_);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(port_),
                                   grpc::InsecureChannelCredentials());
  }
  ~TestServer() { Stop(); }
  void Stop() {
    if (!server_) return;
    server_->Shutdown(std::chrono::system_clock::now() + 1s);
    rpc_.Stop();
    server_.reset();
  }
  void DrainRefused() { rpc_.DrainRefused(); }
  std::shared_ptr<grpc::Channel> channel() { return channel_; }
  rpc::ClientQueue& client_queue() { return client_queue_; }

 private:
  rpc::Server rpc_;
  rpc::ClientQueue client_queue_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

struct Kv : etcdserverpb::KV::AsyncService {};

TEST_CASE("rpc::Server answers unary calls finished inline, held, or from another thread") {
  Kv kv;
  // Filled on the server's thread, joined on this one: the ordering between them runs through
  // libgrpc (the response), which ThreadSanitizer cannot see, so the mutex says it.
  std::mutex finishers_mu;
  std::vector<std::thread> finishers;
  TestServer server([&](rpc::Server& rpc) {
    // Range: answered later from another thread (as the Raft strand answers reads).
    rpc.Unary(&kv, &Kv::RequestRange,
              [&](rpc::CallContext* ctx, const etcdserverpb::RangeRequest* request,
                  etcdserverpb::RangeResponse* response) {
                rpc::UnaryReactor* reactor = ctx->DefaultReactor();
                const auto size = static_cast<std::int64_t>(request->key().size());
                std::lock_guard lock(finishers_mu);
                finishers.emplace_back([reactor, response, size] {
                  std::this_thread::sleep_for(5ms);
                  response->set_count(size);
                  reactor->Finish(grpc::Status::OK);
                });
                return reactor;
              });
    // Put: refused before the handler returns (Finish is held until the call is bound).
    rpc.Unary(
        &kv, &Kv::RequestPut,
        [](rpc::CallContext* ctx, const etcdserverpb::PutRequest*, etcdserverpb::PutResponse*) {
          rpc::UnaryReactor* reactor = ctx->DefaultReactor();
          reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                       std::string(epoch::etcd_errors::kEmptyKey.message)));
          return reactor;
        });
  });
  auto stub = etcdserverpb::KV::NewStub(server.channel());
  for (int i = 0; i < 20; ++i) {
    grpc::ClientContext ctx;
    etcdserverpb::RangeRequest request;
    request.set_key(std::string(static_cast<std::size_t>(i), 'k'));
    etcdserverpb::RangeResponse response;
    REQUIRE(stub->Range(&ctx, request, &response).ok());
    CHECK(response.count() == i);
  }
  grpc::ClientContext ctx;
  etcdserverpb::PutResponse put_response;
  grpc::Status put = stub->Put(&ctx, etcdserverpb::PutRequest{}, &put_response);
  CHECK(put.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(put.error_message() == epoch::etcd_errors::kEmptyKey.message);
  {
    std::lock_guard lock(finishers_mu);
    for (std::thread& t : finishers) t.join();
  }
  server.Stop();
}

// A long wait (as Lock's): hears OnCancel when the client gives up, finishes then, and is done.
class WaitingReactor final : public rpc::UnaryReactor {
 public:
  WaitingReactor(std::atomic<int>& cancels, std::atomic<int>& dones)
      : cancels_(cancels), dones_(dones) {}
  void OnCancel() override {
    ++cancels_;
    Finish(grpc::Status(grpc::StatusCode::CANCELLED, "context canceled"));
  }
  void OnDone() override {
    ++dones_;
    delete this;
  }

 private:
  std::atomic<int>& cancels_;
  std::atomic<int>& dones_;
};

TEST_CASE("rpc::Server tells a notify_cancel reactor about a cancelled call, then ends it") {
  Kv kv;
  std::atomic<int> started{0};
  std::atomic<int> cancels{0};
  std::atomic<int> dones{0};
  TestServer server([&](rpc::Server& rpc) {
    rpc.Unary(
        &kv, &Kv::RequestTxn,
        [&](rpc::CallContext*, const etcdserverpb::TxnRequest*, etcdserverpb::TxnResponse*) {
          ++started;
          return new WaitingReactor(cancels, dones);
        },
        rpc::UnaryOptions{.pending = 1, .notify_cancel = true});
  });
  auto stub = etcdserverpb::KV::NewStub(server.channel());
  for (int i = 1; i <= 3; ++i) {
    grpc::ClientContext ctx;
    grpc::Status status;
    std::thread caller([&] {
      etcdserverpb::TxnResponse response;
      status = stub->Txn(&ctx, etcdserverpb::TxnRequest{}, &response);
    });
    REQUIRE(Eventually([&] { return started == i; }));  // the server holds the call
    ctx.TryCancel();
    caller.join();
    CHECK(status.error_code() == grpc::StatusCode::CANCELLED);
  }
  CHECK(Eventually([&] { return cancels == 3 && dones == 3; }));
  server.Stop();
  CHECK(cancels == 3);
  CHECK(dones == 3);
}

struct Watch : etcdserverpb::Watch::AsyncService {};

// Echoes each request's start_revision as a watch_id; reads again after each write.
class EchoStream final
    : public rpc::BidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse> {
 public:
  EchoStream(std::atomic<int>& dones, std::atomic<int>& half_closes)
      : dones_(dones), half_closes_(half_closes) {
    StartRead(&request_);  // before the handler returns: held until the call is bound
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      ++half_closes_;
      Finish(grpc::Status(grpc::StatusCode::OK, ""));
      return;
    }
    response_.set_watch_id(request_.create_request().start_revision());
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (ok) StartRead(&request_);
  }
  void OnDone() override {
    ++dones_;
    delete this;
  }

 private:
  std::atomic<int>& dones_;
  std::atomic<int>& half_closes_;
  etcdserverpb::WatchRequest request_;
  etcdserverpb::WatchResponse response_;
};

// A server whose Watch method echoes (EchoStream), with its counters.
struct EchoWatchServer {
  Watch watch;
  std::atomic<int> dones{0};
  std::atomic<int> half_closes{0};
  TestServer server{[this](rpc::Server& rpc) {
    rpc.Bidi(&watch, &Watch::RequestWatch,
             [this](rpc::CallContext*) { return new EchoStream(dones, half_closes); });
  }};
};

TEST_CASE("rpc::Server runs a bidi stream: held read, echoes, half-close, one OnDone") {
  EchoWatchServer echo;
  std::atomic<int>& dones = echo.dones;
  std::atomic<int>& half_closes = echo.half_closes;
  TestServer& server = echo.server;
  auto stub = etcdserverpb::Watch::NewStub(server.channel());
  for (int round = 0; round < 2; ++round) {
    grpc::ClientContext ctx;
    auto stream = stub->Watch(&ctx);
    for (std::int64_t i = 1; i <= 5; ++i) {
      etcdserverpb::WatchRequest request;
      request.mutable_create_request()->set_start_revision(i * 10);
      REQUIRE(stream->Write(request));
      etcdserverpb::WatchResponse response;
      REQUIRE(stream->Read(&response));
      CHECK(response.watch_id() == i * 10);
    }
    stream->WritesDone();
    CHECK(stream->Finish().ok());
  }
  CHECK(Eventually([&] { return dones == 2; }));
  CHECK(half_closes == 2);
  server.Stop();
}

// Starts each write on a thread of its own (as WatchSession::Flush does from the watch strand) and
// frees the written response in OnWriteDone, on the queue thread. gRPC serialises the message
// inside Write, before it queues the operation; ThreadSanitizer must see that order too.
class OffThreadWriteStream final
    : public rpc::BidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse> {
 public:
  explicit OffThreadWriteStream(std::atomic<int>& dones) : dones_(dones) { StartRead(&request_); }
  ~OffThreadWriteStream() override {
    if (writer_.joinable()) writer_.join();
  }
  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::OK, ""));
      return;
    }
    const std::int64_t id = request_.create_request().start_revision();
    if (writer_.joinable()) writer_.join();  // its write completed: only its return is left
    writer_ = std::thread([this, id] {
      const etcdserverpb::WatchResponse* response = nullptr;
      {
        std::lock_guard lock(mu_);
        in_flight_ = std::make_unique<etcdserverpb::WatchResponse>();
        in_flight_->set_watch_id(id);
        in_flight_->add_events()->mutable_kv()->set_key(std::string(64, 'k'));
        response = in_flight_.get();
      }
      StartWrite(response);
    });
  }
  void OnWriteDone(bool ok) override {
    {
      std::lock_guard lock(mu_);
      in_flight_.reset();
    }
    if (ok) StartRead(&request_);
  }
  void OnDone() override {
    ++dones_;
    delete this;
  }

 private:
  std::atomic<int>& dones_;
  etcdserverpb::WatchRequest request_;  // queue thread only
  std::thread writer_;                  // queue thread only
  std::mutex mu_;
  std::unique_ptr<etcdserverpb::WatchResponse> in_flight_;  // guarded by mu_
};

TEST_CASE("rpc::Server orders a write started off the queue thread before its OnWriteDone") {
  Watch watch;
  std::atomic<int> dones{0};
  TestServer server{[&](rpc::Server& rpc) {
    rpc.Bidi(&watch, &Watch::RequestWatch,
             [&](rpc::CallContext*) { return new OffThreadWriteStream(dones); });
  }};
  auto stub = etcdserverpb::Watch::NewStub(server.channel());
  grpc::ClientContext ctx;
  auto stream = stub->Watch(&ctx);
  for (std::int64_t i = 1; i <= 20; ++i) {
    etcdserverpb::WatchRequest request;
    request.mutable_create_request()->set_start_revision(i);
    REQUIRE(stream->Write(request));
    etcdserverpb::WatchResponse response;
    REQUIRE(stream->Read(&response));
    CHECK(response.watch_id() == i);
  }
  stream->WritesDone();
  CHECK(stream->Finish().ok());
  CHECK(Eventually([&] { return dones == 1; }));
  server.Stop();
}

// Answers a request with a burst of start_revision responses (watch_id 0, 1, ...), each but the
// last written with gRPC's buffer hint; with key "finish" every one carries the hint and the
// stream then finishes. The stream's very first write carries the hint too: the layer must drop
// it there (gRPC fails a hinted write that carries the initial metadata).
class BurstStream final
    : public rpc::BidiReactor<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse> {
 public:
  BurstStream() { StartRead(&request_); }
  void OnReadDone(bool ok) override {
    if (!ok) return Finish(grpc::Status::OK);
    burst_ = request_.create_request().start_revision();
    finish_after_ = request_.create_request().key() == "finish";
    next_ = 0;
    WriteNext();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) return;
    if (next_ < burst_) return WriteNext();
    if (finish_after_) return Finish(grpc::Status::OK);
    StartRead(&request_);
  }
  void OnDone() override { delete this; }

 private:
  void WriteNext() {
    response_.set_watch_id(next_++);
    grpc::WriteOptions options;
    if (next_ < burst_ || finish_after_) options.set_buffer_hint();
    StartWrite(&response_, options);
  }

  etcdserverpb::WatchRequest request_;
  etcdserverpb::WatchResponse response_;
  std::int64_t burst_ = 0;
  std::int64_t next_ = 0;
  bool finish_after_ = false;
};

TEST_CASE(
    "rpc::Server sends a buffer-hinted burst once a write without the hint or Finish follows") {
  Watch watch;
  TestServer server{[&](rpc::Server& rpc) {
    rpc.Bidi(&watch, &Watch::RequestWatch, [](rpc::CallContext*) { return new BurstStream(); });
  }};
  auto stub = etcdserverpb::Watch::NewStub(server.channel());
  const bool by_finish = GENERATE(false, true);
  CAPTURE(by_finish);
  grpc::ClientContext ctx;
  // A response left in the server's buffer would block Read: the deadline turns that into a
  // failure.
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto stream = stub->Watch(&ctx);
  // Two bursts on one stream, the second larger than gRPC's 64 KiB write buffer.
  for (const std::int64_t burst : {200, 20000}) {
    etcdserverpb::WatchRequest request;
    request.mutable_create_request()->set_start_revision(burst);
    if (by_finish && burst == 20000) request.mutable_create_request()->set_key("finish");
    REQUIRE(stream->Write(request));
    for (std::int64_t i = 0; i < burst; ++i) {
      CAPTURE(burst, i);
      etcdserverpb::WatchResponse response;
      REQUIRE(stream->Read(&response));
      REQUIRE(response.watch_id() == i);
    }
  }
  stream->WritesDone();
  etcdserverpb::WatchResponse extra;
  CHECK_FALSE(stream->Read(&extra));
  CHECK(stream->Finish().ok());
  server.Stop();
}

TEST_CASE("rpc::Server ends a stream the client cancelled: OnCancel, then OnDone") {
  EchoWatchServer echo;
  std::atomic<int>& dones = echo.dones;
  TestServer& server = echo.server;
  auto stub = etcdserverpb::Watch::NewStub(server.channel());
  grpc::ClientContext ctx;
  auto stream = stub->Watch(&ctx);
  etcdserverpb::WatchRequest request;
  request.mutable_create_request()->set_start_revision(7);
  REQUIRE(stream->Write(request));
  etcdserverpb::WatchResponse response;
  REQUIRE(stream->Read(&response));
  ctx.TryCancel();
  CHECK(stream->Finish().error_code() == grpc::StatusCode::CANCELLED);
  // The reactor never called Finish: the outstanding read ends (!ok), it finishes then.
  CHECK(Eventually([&] { return dones == 1; }));
  server.Stop();
}

struct Maintenance : etcdserverpb::Maintenance::AsyncService {};

class ChunkStream final : public rpc::WriteReactor<etcdserverpb::SnapshotResponse> {
 public:
  ChunkStream(int chunks, std::atomic<int>& dones) : left_(chunks), dones_(dones) { Next(); }
  void OnWriteDone(bool ok) override {
    if (!ok) return Finish(grpc::Status(grpc::StatusCode::CANCELLED, "broken"));
    Next();
  }
  void OnDone() override {
    ++dones_;
    delete this;
  }

 private:
  void Next() {
    if (left_ == 0) return Finish(grpc::Status::OK);
    response_.set_remaining_bytes(static_cast<std::uint64_t>(--left_));
    response_.set_blob(std::string(1000, 'x'));
    StartWrite(&response_);
  }
  int left_;
  std::atomic<int>& dones_;
  etcdserverpb::SnapshotResponse response_;
};

TEST_CASE("rpc::Server streams a server-streaming call to its end") {
  Maintenance maintenance;
  std::atomic<int> dones{0};
  TestServer server([&](rpc::Server& rpc) {
    rpc.ServerStream(&maintenance, &Maintenance::RequestSnapshot,
                     [&](rpc::CallContext*, const etcdserverpb::SnapshotRequest*) {
                       return new ChunkStream(4, dones);
                     });
  });
  auto stub = etcdserverpb::Maintenance::NewStub(server.channel());
  grpc::ClientContext ctx;
  auto reader = stub->Snapshot(&ctx, etcdserverpb::SnapshotRequest{});
  etcdserverpb::SnapshotResponse chunk;
  std::vector<std::uint64_t> remaining;
  while (reader->Read(&chunk)) remaining.push_back(chunk.remaining_bytes());
  CHECK(reader->Finish().ok());
  CHECK(remaining == std::vector<std::uint64_t>{3, 2, 1, 0});
  CHECK(Eventually([&] { return dones == 1; }));
  server.Stop();
}

// A stream the server holds open and writes to only when told, from another thread (as the
// watch hub writes to watch streams).
class IdleStream final : public rpc::WriteReactor<etcdserverpb::SnapshotResponse> {
 public:
  IdleStream(std::atomic<int>& dones, std::atomic<int>& failed_writes)
      : dones_(dones), failed_writes_(failed_writes) {}
  void Write() {
    response_.set_blob("late");
    StartWrite(&response_);
  }
  void OnWriteDone(bool ok) override {
    if (ok) return;
    ++failed_writes_;
    Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "stopping"));
  }
  void OnDone() override {
    ++dones_;
    delete this;
  }

 private:
  std::atomic<int>& dones_;
  std::atomic<int>& failed_writes_;
  etcdserverpb::SnapshotResponse response_;
};

// Regression: a watch stream written to after the server stopped aborted the process (gRPC's
// "assertion failed: grpc_cq_begin_op") when a removed member shut down.
TEST_CASE("rpc::Server refuses a stream's operations once stopped, and still ends the stream") {
  Maintenance maintenance;
  std::atomic<IdleStream*> stream{nullptr};
  std::atomic<int> dones{0};
  std::atomic<int> failed_writes{0};
  TestServer server([&](rpc::Server& rpc) {
    rpc.ServerStream(&maintenance, &Maintenance::RequestSnapshot,
                     [&](rpc::CallContext*, const etcdserverpb::SnapshotRequest*) {
                       auto* s = new IdleStream(dones, failed_writes);
                       stream = s;
                       return s;
                     });
  });
  auto stub = etcdserverpb::Maintenance::NewStub(server.channel());
  grpc::ClientContext ctx;
  auto reader = stub->Snapshot(&ctx, etcdserverpb::SnapshotRequest{});
  REQUIRE(Eventually([&] { return stream.load() != nullptr; }));
  server.Stop();  // the queues shut down with the stream still open
  CHECK(dones == 0);
  stream.load()->Write();  // refused and kept: not started on a queue that shut down
  CHECK(failed_writes == 0);
  server.DrainRefused();  // the write fails, the reactor finishes, the stream ends
  CHECK(failed_writes == 1);
  CHECK(dones == 1);
  (void)reader->Finish();
}

// A client call of the server's own (as the lease forwarder makes) on the client queue.
class ClientRange final : public rpc::detail::Tag {
 public:
  grpc::ClientContext ctx;
  etcdserverpb::RangeResponse response;
  grpc::Status status;
  std::unique_ptr<grpc::ClientAsyncResponseReader<etcdserverpb::RangeResponse>> reader;
  std::promise<std::pair<grpc::Status, std::int64_t>> done;
  void Done(bool) override { done.set_value({status, response.count()}); }
};

TEST_CASE("rpc::ClientQueue completes client calls on the server's queue; refuses when closed") {
  rpc::ClientQueue closed;
  CHECK_FALSE(closed.Run([](grpc::CompletionQueue*) { FAIL("ran on a closed queue"); }));

  Kv kv;
  TestServer server([&](rpc::Server& rpc) {
    rpc.Unary(&kv, &Kv::RequestRange,
              [](rpc::CallContext* ctx, const etcdserverpb::RangeRequest*,
                 etcdserverpb::RangeResponse* response) {
                response->set_count(42);
                rpc::UnaryReactor* reactor = ctx->DefaultReactor();
                reactor->Finish(grpc::Status::OK);
                return reactor;
              });
  });
  auto stub = etcdserverpb::KV::NewStub(server.channel());
  ClientRange call;
  REQUIRE(server.client_queue().Run([&](grpc::CompletionQueue* cq) {
    call.reader = stub->PrepareAsyncRange(&call.ctx, etcdserverpb::RangeRequest{}, cq);
    call.reader->StartCall();
    call.reader->Finish(&call.response, &call.status, call.Started());
  }));
  auto result = call.done.get_future().get();
  CHECK(result.first.ok());
  CHECK(result.second == 42);
  server.Stop();
  CHECK_FALSE(server.client_queue().Run([](grpc::CompletionQueue*) {}));
}

}  // namespace
}  // namespace epoch::server

namespace epoch::server {
namespace {

TEST_CASE(
    "rpc::ClientQueue::Post runs functions on the queue's thread, in order; not when closed") {
  rpc::ClientQueue closed;
  CHECK_FALSE(closed.Post([] { FAIL("ran on a closed queue"); }));
  CHECK(closed.Close().empty());

  Kv kv;
  TestServer server([&](rpc::Server& rpc) {
    rpc.Unary(
        &kv, &Kv::RequestRange,
        [](rpc::CallContext* ctx, const etcdserverpb::RangeRequest*, etcdserverpb::RangeResponse*) {
          rpc::UnaryReactor* reactor = ctx->DefaultReactor();
          reactor->Finish(grpc::Status::OK);
          return reactor;
        });
  });
  std::mutex mu;
  std::vector<int> ran;
  std::vector<std::thread::id> threads;
  for (int i = 0; i < 100; ++i) {
    REQUIRE(server.client_queue().Post([&, i] {
      std::lock_guard lock(mu);
      ran.push_back(i);
      threads.push_back(std::this_thread::get_id());
    }));
  }
  REQUIRE(Eventually([&] {
    std::lock_guard lock(mu);
    return ran.size() == 100;
  }));
  std::vector<int> expected(100);
  for (int i = 0; i < 100; ++i) expected[static_cast<std::size_t>(i)] = i;
  CHECK(ran == expected);
  CHECK(std::count(threads.begin(), threads.end(), threads.front()) == 100);  // one thread
  CHECK(threads.front() != std::this_thread::get_id());
  server.Stop();
  CHECK_FALSE(server.client_queue().Post([] {}));
}

}  // namespace
}  // namespace epoch::server
