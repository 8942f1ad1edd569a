// The gateway's calls into the node's own gRPC server over its in-process channel, with the
// request already serialized: a unary call answered once, or a stream whose messages arrive one
// by one. Responses are turned into JSON on the gRPC callback thread that receives them, so the
// HTTP loop only writes bytes.
//
// Threading: Unary and Stream may be called from any thread; their callbacks run on gRPC's
// callback threads (never on the caller's) and must only post. Cancel() from any thread.
#pragma once

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "epoch/gateway/route_table.h"

namespace epoch::gateway {

// A call in flight; Cancel() ends it with CANCELLED (a no-op once it has ended).
class CallHandle {
 public:
  virtual ~CallHandle() = default;
  virtual void Cancel() = 0;
};

// The answer to a unary call: the HTTP status and the JSON body (the response, or the error
// body).
using UnaryDone = std::function<void(int http_code, std::string body)>;

struct StreamSink {
  // One response message as a stream line ({"result":...}\n).
  std::function<void(std::string line)> message;
  // The call ended (after its last message), with its status.
  std::function<void(grpc::Status status)> done;
};

class GrpcCalls {
 public:
  explicit GrpcCalls(std::shared_ptr<grpc::Channel> channel) : stub_(std::move(channel)) {}

  // `token` (may be empty) travels as the "token" metadata, as etcd's clients send it.
  std::shared_ptr<CallHandle> Unary(const Route& route, std::string request,
                                    const std::string& token, UnaryDone done);
  std::shared_ptr<CallHandle> Stream(const Route& route, std::string request,
                                     const std::string& token, StreamSink sink);

 private:
  grpc::GenericStub stub_;
};

}  // namespace epoch::gateway
