// What GatewayHttp's connections share: the gRPC calls, the options, the fallback and the
// counters. Held by GatewayHttp and by every connection, so a connection that outlives the
// GatewayHttp (its call still finishing) still finds them.
#pragma once

#include <string>

#include "epoch/gateway/gateway_http.h"
#include "epoch/stream_slots.h"
#include "gateway_metrics.h"
#include "grpc_calls.h"

namespace epoch::gateway {

struct GatewayHttp::Shared {
  Shared(std::shared_ptr<grpc::Channel> channel, GatewayOptions o, Fallback f)
      : calls(std::move(channel)),
        options(std::move(o)),
        fallback(std::move(f)),
        connections(options.max_connections, options.max_connections_per_address) {}
  GrpcCalls calls;
  const GatewayOptions options;
  const Fallback fallback;
  GatewayMetrics metrics;
  // Admission of connections; each connection holds its slot until it is destroyed.
  StreamSlots connections;
};

}  // namespace epoch::gateway
