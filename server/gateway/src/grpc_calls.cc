#include "grpc_calls.h"

#include <vector>

#include "epoch/gateway/json_codec.h"

namespace epoch::gateway {
namespace {

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  out.reserve(buffer.Length());
  for (const grpc::Slice& s : slices) {
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return out;
}

void SetToken(grpc::ClientContext* context, const std::string& token) {
  if (!token.empty()) context->AddMetadata("token", token);
}

struct UnaryCall : CallHandle {
  void Cancel() override { context.TryCancel(); }
  grpc::ClientContext context;
  grpc::ByteBuffer request;
  grpc::ByteBuffer response;
};

// One stream: writes the request once and half-closes, then reads until the server ends it. Keeps
// itself alive until OnDone.
class StreamCall : public CallHandle,
                   public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamCall(const Route& route, StreamSink sink) : route_(route), sink_(std::move(sink)) {}

  void Begin(std::shared_ptr<StreamCall> self, grpc::GenericStub& stub, std::string request,
             const std::string& token) {
    self_ = std::move(self);
    SetToken(&context_, token);
    request_ = ToBuffer(request);
    stub.PrepareBidiStreamingCall(&context_, std::string(route_.method), grpc::StubOptions(), this);
    // The body is the whole request side, so the stream is half-closed after it, as etcd's
    // gateway does once it has read the body: Watch keeps serving a half-closed stream,
    // LeaseKeepAlive answers and ends it.
    StartWriteLast(&request_, grpc::WriteOptions());
    StartRead(&response_);
    StartCall();
  }

  void Cancel() override { context_.TryCancel(); }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    Result<std::string> json = ResponseToJson(route_, FromBuffer(response_));
    if (!json.ok()) return context_.TryCancel();
    sink_.message(StreamResult(*json));
    StartRead(&response_);
  }

  void OnDone(const grpc::Status& status) override {
    std::shared_ptr<StreamCall> keep = std::move(self_);  // this ends with the function
    sink_.done(status);
  }

 private:
  const Route& route_;
  StreamSink sink_;
  grpc::ClientContext context_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  std::shared_ptr<StreamCall> self_;  // set from Begin to OnDone
};

}  // namespace

std::shared_ptr<CallHandle> GrpcCalls::Unary(const Route& route, std::string request,
                                             const std::string& token, UnaryDone done) {
  auto call = std::make_shared<UnaryCall>();
  SetToken(&call->context, token);
  call->request = ToBuffer(request);
  stub_.UnaryCall(
      &call->context, std::string(route.method), grpc::StubOptions(), &call->request,
      &call->response, [call, &route, done = std::move(done)](const grpc::Status& status) {
        if (!status.ok()) {
          return done(HttpStatusFromCode(status.error_code()),
                      ErrorBody(status.error_code(), status.error_message()));
        }
        Result<std::string> json = ResponseToJson(route, FromBuffer(call->response));
        if (!json.ok()) {
          return done(500, ErrorBody(grpc::StatusCode::INTERNAL, json.status().message()));
        }
        done(200, *std::move(json));
      });
  return call;
}

std::shared_ptr<CallHandle> GrpcCalls::Stream(const Route& route, std::string request,
                                              const std::string& token, StreamSink sink) {
  auto call = std::make_shared<StreamCall>(route, std::move(sink));
  call->Begin(call, stub_, std::move(request), token);
  return call;
}

}  // namespace epoch::gateway
