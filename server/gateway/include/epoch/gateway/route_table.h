// The gateway's route table: each HTTP path of etcd 3.4's grpc-gateway (the google.api.http
// options of etcd's rpc.proto, v3lock.proto and v3election.proto) and the gRPC method it calls,
// with the request and response message types and the call's shape.
//
// Every route is served under /v3/ and under the /v3beta/ and /v3alpha/ aliases older clients
// probe: FindRoute strips the prefix. Paths are POST only, as etcd's.
//
// Threading: the table is a constant; FindRoute may be called from any thread.
#pragma once

#include <google/protobuf/descriptor.h>

#include <span>
#include <string_view>

namespace epoch::gateway {

enum class CallShape {
  kUnary,         // one request, one response
  kServerStream,  // one request (then half-close), a stream of responses (Snapshot, Observe)
  kBidiStream,    // one request, the stream stays open for the client's lifetime (Watch,
                  // LeaseKeepAlive): as etcd's gateway, the request side is never half-closed
};

struct Route {
  std::string_view path;    // under /v3/, without the prefix: "kv/range"
  std::string_view method;  // the gRPC method: "/etcdserverpb.KV/Range"
  const google::protobuf::Descriptor* (*request)();
  const google::protobuf::Descriptor* (*response)();
  CallShape shape = CallShape::kUnary;
};

// Every route, in the order of etcd's proto files (and the aliases etcd binds, such as
// kv/lease/revoke for lease/revoke).
[[nodiscard]] std::span<const Route> Routes();

// The route for an HTTP path ("/v3/kv/range", "/v3beta/kv/range", "/v3alpha/kv/range"), or null.
// A query string is not part of the path; the caller strips it.
[[nodiscard]] const Route* FindRoute(std::string_view http_path);

// Whether the path is under one of the gateway's prefixes (/v3/, /v3beta/, /v3alpha/): a path
// there that FindRoute does not know is a 404 of the gateway's, not of the HTTP endpoint's.
[[nodiscard]] bool IsGatewayPath(std::string_view http_path);

}  // namespace epoch::gateway
