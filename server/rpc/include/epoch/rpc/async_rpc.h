// rpc: gRPC's asynchronous server API behind reactors shaped like its callback API's.
//
// Why: Debian's gRPC 1.51 runs callback-API handlers on two "nexting" threads per process that
// take turns polling; under load nearly every completion hands the poller role from one to the
// other (a futex wake and a context switch each, expensive on this kind of VM). Here each
// completion queue has one thread that polls, runs the handlers and the reactions itself, so a
// request read, answered and finished on that thread crosses no thread at all. Measured:
// bench/kv/PROFILE.md. Every service must be served this way: one callback method
// anywhere in the process brings the nexting threads back, and they poll every connection.
//
// Shape: a service derives from the generated `AsyncService` and registers each of its methods
// with Server. Handlers look like the callback API's (a context, the request, the response;
// they return a reactor), and reactors have the callback API's methods (Finish, StartRead,
// StartWrite; OnCancel, OnReadDone, OnWriteDone, OnDone), so a service's code reads the same.
// Differences from the callback API:
//   - reactions always run on a completion-queue thread, never inline inside an operation;
//   - a unary reactor hears OnCancel only when its method was registered with notify_cancel
//     (watching for cancellation costs an extra operation per call).
//
// Threading: Finish, StartRead and StartWrite may be called from any thread, also before the
// handler returned (they are held until then); at most one read and one write outstanding per
// stream; Finish once, not while a write is outstanding. A reactor must not be used after its
// OnDone. A write with grpc::WriteOptions::set_buffer_hint may stay in gRPC's buffer (and complete
// at once) until a later write without it, or Finish, sends it: the last write of a burst must not
// carry the hint. A stream's first write goes without it whatever its options say: it carries the
// initial metadata, and gRPC 1.51 completes such a write not ok (grpc/grpc#12975).
#pragma once

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <thread>
#include <type_traits>
#include <vector>

// GCC's -Wmaybe-uninitialized misfires (sanitizer builds) on the calls through pointers to the
// generated AsyncService's RequestX members below. (Those calls go through local copies of the
// pointers: `method_->service->*method_->request` makes GCC's UBSan vptr check test the wrong
// object.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace epoch::server::rpc {

namespace detail {

// ThreadSanitizer cannot see that a completion queue orders an operation's start before the
// delivery of its tag (the synchronisation is inside libgrpc, built without it). Started() before
// starting an operation and the queue thread's Delivered() before running the tag say so; both
// are no-ops in other builds.
#if defined(EPOCH_TSAN)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

// What a completion-queue event is delivered to.
class Tag {
 public:
  virtual void Done(bool ok) = 0;
  // Returns this, to pass as the operation's tag.
  Tag* Started() {
#if defined(EPOCH_TSAN)
    __tsan_release(this);
#endif
    return this;
  }
  void Delivered() {
#if defined(EPOCH_TSAN)
    __tsan_acquire(this);
#endif
  }

 protected:
  ~Tag() = default;
};

// Whether operations may still start on the server's completion queues. gRPC aborts the process
// when an operation starts on a queue whose shutdown has completed, and a reactor may start one at
// any time: from a reaction while the queues drain, or from another thread (a watch stream's
// writer) after they drained. So the server closes the gate before it shuts the queues down; an
// operation started after that is not started, and its tag is kept and delivered not ok by Drain,
// on the stopping thread, as a failed operation's would be.
class OpGate {
 public:
  // Starts an operation: `start(tag)` runs (under a shared lock) while the gate is open.
  template <typename Start>
  void Begin(Tag* tag, Start&& start) {
    {
      std::shared_lock lock(mu_);
      if (!closed_) {
        start(tag->Started());
        return;
      }
    }
    std::lock_guard lock(refused_mu_);
    refused_.push_back(tag);
  }
  void Close() {
    std::unique_lock lock(mu_);
    closed_ = true;
  }
  // Delivers the refused operations, not ok, until none is left (a delivery may refuse more).
  void Drain();

 private:
  std::shared_mutex mu_;
  bool closed_ = false;  // guarded by mu_
  std::mutex refused_mu_;
  std::vector<Tag*> refused_;  // guarded by refused_mu_
};

// A call's operations, as its reactor starts them.
class UnaryOps {
 public:
  virtual void SendFinish(grpc::Status status) = 0;

 protected:
  ~UnaryOps() = default;
};

template <typename Request, typename Response>
class StreamOps {
 public:
  virtual void SendRead(Request* request) = 0;
  virtual void SendWrite(const Response* response, grpc::WriteOptions options) = 0;
  virtual void SendFinish(grpc::Status status) = 0;

 protected:
  ~StreamOps() = default;
};

}  // namespace detail

class UnaryReactor {
 public:
  virtual ~UnaryReactor() = default;
  // Sends the response (status OK) or the error. Once.
  void Finish(grpc::Status status);
  virtual void OnCancel() {}
  virtual void OnDone() {}

  // The framework's: attaches the call and sends a Finish that came before.
  void Bind(detail::UnaryOps* call);

 private:
  std::mutex mu_;
  detail::UnaryOps* call_ = nullptr;  // guarded by mu_
  std::optional<grpc::Status> held_;  // a Finish before Bind; guarded by mu_
};

// Operations a stream reactor started before its handler returned, sent by Bind in order.
template <typename Request, typename Response>
class StreamReactorBase {
 public:
  virtual ~StreamReactorBase() = default;
  virtual void OnWriteDone(bool /*ok*/) {}
  virtual void OnCancel() {}
  virtual void OnDone() = 0;

  void Bind(detail::StreamOps<Request, Response>* call) {
    Request* read = nullptr;
    const Response* write = nullptr;
    grpc::WriteOptions write_options;
    std::optional<grpc::Status> finish;
    {
      std::lock_guard lock(mu_);
      call_ = call;
      read = held_read_;
      write = held_write_;
      write_options = held_write_options_;
      finish = std::move(held_finish_);
    }
    if (read != nullptr) call->SendRead(read);
    if (write != nullptr) call->SendWrite(write, write_options);
    if (finish) call->SendFinish(std::move(*finish));
  }

 protected:
  void DoStartRead(Request* request) {
    if (auto* call = Held([&] { held_read_ = request; })) call->SendRead(request);
  }
  void DoStartWrite(const Response* response, grpc::WriteOptions options) {
    auto* call = Held([&] {
      held_write_ = response;
      held_write_options_ = options;
    });
    if (call != nullptr) call->SendWrite(response, options);
  }
  void DoFinish(grpc::Status status) {
    if (auto* call = Held([&] { held_finish_ = status; })) call->SendFinish(std::move(status));
  }

 private:
  // The call, or null after `hold` kept the operation for Bind.
  template <typename Hold>
  detail::StreamOps<Request, Response>* Held(Hold hold) {
    std::lock_guard lock(mu_);
    if (call_ == nullptr) hold();
    return call_;
  }

  std::mutex mu_;
  detail::StreamOps<Request, Response>* call_ = nullptr;  // guarded by mu_
  Request* held_read_ = nullptr;                          // guarded by mu_
  const Response* held_write_ = nullptr;                  // guarded by mu_
  grpc::WriteOptions held_write_options_;                 // guarded by mu_
  std::optional<grpc::Status> held_finish_;               // guarded by mu_
};

template <typename Request, typename Response>
class BidiReactor : public StreamReactorBase<Request, Response> {
 public:
  void StartRead(Request* request) { this->DoStartRead(request); }
  void StartWrite(const Response* response, grpc::WriteOptions options = {}) {
    this->DoStartWrite(response, options);
  }
  void Finish(grpc::Status status) { this->DoFinish(std::move(status)); }
  virtual void OnReadDone(bool /*ok*/) {}
};

// Server streaming: the request came with the call.
template <typename Response>
class WriteReactor : public StreamReactorBase<std::nullptr_t, Response> {
 public:
  void StartWrite(const Response* response, grpc::WriteOptions options = {}) {
    this->DoStartWrite(response, options);
  }
  void Finish(grpc::Status status) { this->DoFinish(std::move(status)); }
};

// A call's context (deadline, metadata, peer) and, for unary calls, the reactor most handlers
// answer with.
class CallContext : public grpc::ServerContext {
 public:
  UnaryReactor* DefaultReactor() { return &default_reactor_; }

 private:
  UnaryReactor default_reactor_;
};

struct UnaryOptions {
  int pending = 2;             // calls requested ahead, per completion queue
  bool notify_cancel = false;  // the reactor hears OnCancel
};

namespace detail {

class MethodBase {
 public:
  virtual ~MethodBase() = default;
  // Requests the next call of this method on `cq`.
  virtual void RequestCall(grpc::ServerCompletionQueue* cq) = 0;
  int pending = 2;
  OpGate* gate = nullptr;  // the server's; every operation of its calls starts through it
};

// One event kind of one call.
template <typename Call>
class CallTag final : public Tag {
 public:
  using Handler = void (Call::*)(bool);
  CallTag(Call* call, Handler handler) : call_(call), handler_(handler) {}
  void Done(bool ok) override { (call_->*handler_)(ok); }

 private:
  Call* call_;
  Handler handler_;
};

// How a call ends (completion-queue thread only): Finish's completion, and the done notice,
// which means OnCancel when the call was cancelled — held until the reactor exists.
template <typename Reactor>
struct CallEnd {
  bool finished = false;
  bool notified = false;
  bool cancel_held = false;

  void Notified(grpc::ServerContext& ctx, Reactor* reactor) {
    notified = true;
    if (!ctx.IsCancelled()) return;
    if (reactor != nullptr) {
      reactor->OnCancel();
    } else {
      cancel_held = true;
    }
  }
  void Started(Reactor* reactor) const {
    if (cancel_held) reactor->OnCancel();
  }
};

template <typename Service, typename Request, typename Response>
class UnaryMethod;

template <typename Service, typename Request, typename Response>
class UnaryCall final : public UnaryOps {
 public:
  using Method = UnaryMethod<Service, Request, Response>;
  UnaryCall(const Method* method, grpc::ServerCompletionQueue* cq)
      : method_(method), cq_(cq), writer_(&ctx_) {
    if (method_->options.notify_cancel) ctx_.AsyncNotifyWhenDone(done_tag_.Started());
    method_->gate->Begin(&start_tag_, [this](void* tag) {
      Service* service = method_->service;
      const auto request = method_->request;
      (service->*request)(&ctx_, &request_, &writer_, cq_, cq_, tag);
    });
  }

  void SendFinish(grpc::Status status) override {
    method_->gate->Begin(&finish_tag_, [&](void* tag) {
      if (status.ok()) {
        writer_.Finish(response_, status, tag);
      } else {
        writer_.FinishWithError(status, tag);
      }
    });
  }

 private:
  void OnStart(bool ok) {
    if (!ok) {  // the server is shutting down: no call came
      delete this;
      return;
    }
    new UnaryCall(method_, cq_);
    reactor_ = method_->handler(&ctx_, &request_, &response_);
    reactor_->Bind(this);
    end_.Started(reactor_);
  }
  void OnFinish(bool) {
    end_.finished = true;
    MaybeDone();
  }
  void OnCallDone(bool) {
    end_.Notified(ctx_, reactor_);
    MaybeDone();
  }
  void MaybeDone() {
    if (!end_.finished || (method_->options.notify_cancel && !end_.notified)) return;
    reactor_->OnDone();
    delete this;
  }

  const Method* method_;
  grpc::ServerCompletionQueue* cq_;
  CallContext ctx_;
  Request request_;
  Response response_;
  grpc::ServerAsyncResponseWriter<Response> writer_;
  UnaryReactor* reactor_ = nullptr;
  CallEnd<UnaryReactor> end_;  // completion-queue thread only
  CallTag<UnaryCall> start_tag_{this, &UnaryCall::OnStart};
  CallTag<UnaryCall> finish_tag_{this, &UnaryCall::OnFinish};
  CallTag<UnaryCall> done_tag_{this, &UnaryCall::OnCallDone};
};

template <typename Service, typename Request, typename Response>
class UnaryMethod final : public MethodBase {
 public:
  using RequestFn = void (Service::*)(grpc::ServerContext*, Request*,
                                      grpc::ServerAsyncResponseWriter<Response>*,
                                      grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*);
  using Handler = std::function<UnaryReactor*(CallContext*, const Request*, Response*)>;
  UnaryMethod(Service* s, RequestFn r, Handler h, UnaryOptions o)
      : service(s), request(r), handler(std::move(h)), options(o) {}
  void RequestCall(grpc::ServerCompletionQueue* cq) override {
    new UnaryCall<Service, Request, Response>(this, cq);
  }

  Service* service;
  RequestFn request;
  Handler handler;
  UnaryOptions options;
};

// A streaming call: `Stream` is ServerAsyncReaderWriter or ServerAsyncWriter; `Reactor` the
// matching reactor; the derived Call requests the call, and OnStart makes the reactor once it came.
template <typename Request, typename Response, typename Stream, typename Reactor>
class StreamCall : public StreamOps<Request, Response> {
 public:
  void SendRead(Request* request) override {
    if constexpr (!std::is_same_v<Request, std::nullptr_t>) {
      reading_ = true;
      gate_->Begin(&read_tag_, [&](void* tag) { stream_.Read(request, tag); });
    } else {
      (void)request;
    }
  }
  void SendWrite(const Response* response, grpc::WriteOptions options) override {
    writing_ = true;
    std::lock_guard starting(write_start_mu_);
    if (!wrote_) options.clear_buffer_hint();  // see the header comment
    wrote_ = true;
    gate_->Begin(&write_tag_, [&](void* tag) { stream_.Write(*response, options, tag); });
  }
  void SendFinish(grpc::Status status) override {
    gate_->Begin(&finish_tag_, [&](void* tag) { stream_.Finish(status, tag); });
  }

 protected:
  StreamCall(grpc::ServerCompletionQueue* cq, OpGate* gate) : cq_(cq), gate_(gate), stream_(&ctx_) {
    ctx_.AsyncNotifyWhenDone(done_tag_.Started());
  }
  virtual ~StreamCall() = default;
  virtual Reactor* MakeReactor() = 0;
  virtual void RequestNext() = 0;

  grpc::ServerCompletionQueue* cq_;
  OpGate* gate_;
  CallContext ctx_;
  Stream stream_;
  CallTag<StreamCall> start_tag_{this, &StreamCall::OnStart};

 private:
  void OnStart(bool ok) {
    if (!ok) {
      delete this;
      return;
    }
    RequestNext();
    reactor_ = MakeReactor();
    reactor_->Bind(this);
    end_.Started(reactor_);
  }
  void OnRead(bool ok) {
    reading_ = false;
    if constexpr (!std::is_same_v<Request, std::nullptr_t>) reactor_->OnReadDone(ok);
    MaybeDone();
  }
  void OnWrite(bool ok) {
    { std::lock_guard started(write_start_mu_); }  // the write's start is over (see the field)
    writing_ = false;
    reactor_->OnWriteDone(ok);
    MaybeDone();
  }
  void OnFinish(bool) {
    end_.finished = true;
    MaybeDone();
  }
  void OnCallDone(bool) {
    end_.Notified(ctx_, reactor_);
    MaybeDone();
  }
  void MaybeDone() {
    if (!end_.finished || !end_.notified || reading_ || writing_) return;
    reactor_->OnDone();
    delete this;
  }

  Reactor* reactor_ = nullptr;
  // Set by the thread starting the operation, before it starts; cleared on the completion-queue
  // thread when its completion is delivered. A stream ends only with neither outstanding.
  std::atomic<bool> reading_{false};
  std::atomic<bool> writing_{false};
  // Held by SendWrite, on whichever thread starts the write, for the whole of stream_.Write: gRPC
  // serialises *response inside Write, before it queues the operation. OnWrite (queue thread)
  // takes it before the reactor's OnWriteDone, which may then free or refill the message. gRPC
  // already orders the two, but through libgrpc's own synchronisation, which ThreadSanitizer
  // cannot see (Tag::Started releases before the serialisation); this makes the order visible
  // in every build. Never held while waiting for anything.
  std::mutex write_start_mu_;
  // A write was started (it carried the initial metadata). Guarded by write_start_mu_.
  bool wrote_ = false;
  CallEnd<Reactor> end_;  // completion-queue thread only
  CallTag<StreamCall> read_tag_{this, &StreamCall::OnRead};
  CallTag<StreamCall> write_tag_{this, &StreamCall::OnWrite};
  CallTag<StreamCall> finish_tag_{this, &StreamCall::OnFinish};
  CallTag<StreamCall> done_tag_{this, &StreamCall::OnCallDone};
};

template <typename Service, typename Request, typename Response>
class BidiMethod final : public MethodBase {
 public:
  using Stream = grpc::ServerAsyncReaderWriter<Response, Request>;
  using Reactor = BidiReactor<Request, Response>;
  using RequestFn = void (Service::*)(grpc::ServerContext*, Stream*, grpc::CompletionQueue*,
                                      grpc::ServerCompletionQueue*, void*);
  using Handler = std::function<Reactor*(CallContext*)>;
  BidiMethod(Service* s, RequestFn r, Handler h) : service(s), request(r), handler(std::move(h)) {}

  class Call final : public StreamCall<Request, Response, Stream, Reactor> {
   public:
    Call(const BidiMethod* method, grpc::ServerCompletionQueue* cq)
        : StreamCall<Request, Response, Stream, Reactor>(cq, method->gate), method_(method) {
      this->gate_->Begin(&this->start_tag_, [this, cq](void* tag) {
        Service* service = method_->service;
        const auto request = method_->request;
        (service->*request)(&this->ctx_, &this->stream_, cq, cq, tag);
      });
    }

   private:
    Reactor* MakeReactor() override { return method_->handler(&this->ctx_); }
    void RequestNext() override { new Call(method_, this->cq_); }
    const BidiMethod* method_;
  };

  void RequestCall(grpc::ServerCompletionQueue* cq) override { new Call(this, cq); }

  Service* service;
  RequestFn request;
  Handler handler;
};

template <typename Service, typename Request, typename Response>
class ServerStreamMethod final : public MethodBase {
 public:
  using Stream = grpc::ServerAsyncWriter<Response>;
  using Reactor = WriteReactor<Response>;
  using RequestFn = void (Service::*)(grpc::ServerContext*, Request*, Stream*,
                                      grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*);
  using Handler = std::function<Reactor*(CallContext*, const Request*)>;
  ServerStreamMethod(Service* s, RequestFn r, Handler h)
      : service(s), request(r), handler(std::move(h)) {}

  class Call final : public StreamCall<std::nullptr_t, Response, Stream, Reactor> {
   public:
    Call(const ServerStreamMethod* method, grpc::ServerCompletionQueue* cq)
        : StreamCall<std::nullptr_t, Response, Stream, Reactor>(cq, method->gate), method_(method) {
      this->gate_->Begin(&this->start_tag_, [this, cq](void* tag) {
        Service* service = method_->service;
        const auto request = method_->request;
        (service->*request)(&this->ctx_, &request_, &this->stream_, cq, cq, tag);
      });
    }

   private:
    Reactor* MakeReactor() override { return method_->handler(&this->ctx_, &request_); }
    void RequestNext() override { new Call(method_, this->cq_); }
    const ServerStreamMethod* method_;
    Request request_;
  };

  void RequestCall(grpc::ServerCompletionQueue* cq) override { new Call(this, cq); }

  Service* service;
  RequestFn request;
  Handler handler;
};

}  // namespace detail

// The first queue of the running Server, for work of the server's own: its client calls
// (forwarding to the leader) complete there, so that no thread of another kind polls (see the
// top of this file), and Post runs functions on its thread (a follower's reads, once their
// ReadIndex round is answered, are served and finished there as the leader's are).
class ClientQueue {
 public:
  // Runs `start` with the queue, under the lock, while the queue is open: what it starts
  // completes on a server thread, as a detail::Tag. False, without running it, when closed.
  bool Run(const std::function<void(grpc::CompletionQueue*)>& start);
  // Runs `fn` on the queue's thread soon; what is posted before it runs shares one wake-up (an
  // alarm that fires at once). False, without keeping it, when closed.
  bool Post(std::function<void()> fn);
  // Post, or run `fn` here when the queue is closed (no server running, or stopping).
  void Dispatch(std::function<void()> fn);
  void Open(grpc::CompletionQueue* cq);
  // Closes the queue and returns what was posted but has not run (the caller runs it).
  [[nodiscard]] std::vector<std::function<void()>> Close();

 private:
  class Drain final : public detail::Tag {
   public:
    explicit Drain(ClientQueue* queue) : queue_(queue) {}
    void Done(bool) override { queue_->RunPosted(); }

   private:
    ClientQueue* queue_;
  };
  void PostLocked(std::function<void()> fn);  // mu_ held, queue open
  void RunPosted();

  std::mutex mu_;
  grpc::CompletionQueue* cq_ = nullptr;        // guarded by mu_
  std::vector<std::function<void()>> posted_;  // guarded by mu_
  bool alarm_set_ = false;                     // guarded by mu_
  grpc::Alarm alarm_;
  Drain drain_{this};
};

// The completion queues, their threads and the registered methods of one grpc::Server.
class Server {
 public:
  explicit Server(int threads) : threads_(threads < 1 ? 1 : threads) {}
  ~Server() { Stop(); }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Before builder.BuildAndStart(): registers the services whose methods were registered here,
  // and adds the completion queues.
  void AddTo(grpc::ServerBuilder& builder);

  // `request` is the generated AsyncService's RequestX; `handler` makes the call's reactor.
  template <typename Owner, typename Request, typename Response, typename Handler>
  void Unary(std::type_identity_t<Owner>* service,
             void (Owner::*request)(grpc::ServerContext*, Request*,
                                    grpc::ServerAsyncResponseWriter<Response>*,
                                    grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*),
             Handler handler, UnaryOptions options = {}) {
    AddService(service);
    auto m = std::make_unique<detail::UnaryMethod<Owner, Request, Response>>(
        service, request, std::move(handler), options);
    m->pending = options.pending;
    m->gate = &gate_;
    methods_.push_back(std::move(m));
  }
  template <typename Owner, typename Request, typename Response, typename Handler>
  void Bidi(std::type_identity_t<Owner>* service,
            void (Owner::*request)(grpc::ServerContext*,
                                   grpc::ServerAsyncReaderWriter<Response, Request>*,
                                   grpc::CompletionQueue*, grpc::ServerCompletionQueue*, void*),
            Handler handler) {
    AddService(service);
    methods_.push_back(std::make_unique<detail::BidiMethod<Owner, Request, Response>>(
        service, request, std::move(handler)));
    methods_.back()->gate = &gate_;
  }
  template <typename Owner, typename Request, typename Response, typename Handler>
  void ServerStream(std::type_identity_t<Owner>* service,
                    void (Owner::*request)(grpc::ServerContext*, Request*,
                                           grpc::ServerAsyncWriter<Response>*,
                                           grpc::CompletionQueue*, grpc::ServerCompletionQueue*,
                                           void*),
                    Handler handler) {
    AddService(service);
    methods_.push_back(std::make_unique<detail::ServerStreamMethod<Owner, Request, Response>>(
        service, request, std::move(handler)));
    methods_.back()->gate = &gate_;
  }

  // After BuildAndStart(): requests the first calls, starts the threads and opens `client`.
  void Start(ClientQueue* client);
  // After grpc::Server::Shutdown(): closes the operation gate (detail::OpGate), shuts the
  // queues down, joins their threads once they drained, and delivers the operations refused
  // meanwhile. A reactor may still start operations afterwards (from a thread that stops later):
  // they are refused and kept for DrainRefused.
  void Stop();
  // Delivers, not ok, the operations refused since Stop; once every thread that may start one
  // has stopped. Stop first.
  void DrainRefused() { gate_.Drain(); }

 private:
  void AddService(grpc::Service* service);

  const int threads_;
  std::vector<grpc::Service*> services_;  // each once, in registration order
  std::vector<std::unique_ptr<grpc::ServerCompletionQueue>> queues_;
  std::vector<std::unique_ptr<detail::MethodBase>> methods_;
  std::vector<std::thread> workers_;
  ClientQueue* client_ = nullptr;
  detail::OpGate gate_;
  bool stopped_ = false;
};

}  // namespace epoch::server::rpc

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
