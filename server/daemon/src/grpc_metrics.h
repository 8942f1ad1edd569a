// GrpcMetrics: go-grpc-prometheus' server metrics, which etcd serves, measured by a gRPC server
// interceptor on every call of the client port's services:
//
//   grpc_server_started_total{grpc_type,grpc_service,grpc_method}            calls started
//   grpc_server_handled_total{grpc_type,grpc_service,grpc_method,grpc_code}  calls finished, by
//                                        status code (Go's names: OK, Canceled, Unavailable, ...)
//   grpc_server_msg_received_total / grpc_server_msg_sent_total              stream messages
//   grpc_server_handling_seconds{grpc_type,grpc_service,grpc_method}         start to status, with
//                                        Prometheus' DefBuckets (etcd --metrics=extensive)
//   etcd_network_client_grpc_received_bytes_total / _sent_bytes_total       message bytes
//   epoch_fencing_tokens_issued_total   calls answered OK with an epoch-fencing-token trailer
//                                        (Lock grants and Campaign wins: the token is the
//                                        lock's or the candidate's key create_revision)
//
// grpc_type is unary, client_stream, server_stream or bidi_stream; grpc_service the full service
// name (etcdserverpb.KV), grpc_method the method (Range). A call that ends without a status
// (the client went away first) is counted as Canceled, as go-grpc-prometheus sees it.
// PreRegister lists every method of a served service at zero before its first call, as
// go-grpc-prometheus does when a service is registered, so rate() and alerts see every series.
//
// Threading: the interceptors run on gRPC's threads, Render on any; a method's counters are
// created on its first call (under a mutex) and are atomics after that.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <array>
#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "epoch/metrics_text.h"

namespace epoch::server {

class GrpcMetrics {
 public:
  static constexpr std::size_t kCodes = 17;  // grpc::StatusCode OK .. UNAUTHENTICATED

  struct MethodStats {
    std::string type;
    std::string service;
    std::string method;
    std::atomic<std::uint64_t> started{0};
    std::array<std::atomic<std::uint64_t>, kCodes> handled{};
    std::atomic<std::uint64_t> msg_received{0};
    std::atomic<std::uint64_t> msg_sent{0};
    Histogram handling{Histogram::DefaultBuckets()};
  };

  // The factory to install with ServerBuilder::experimental().SetInterceptorCreators(); it refers
  // to this object, which must outlive the server.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface> InterceptorFactory();

  // The stats of `full_method` ("/etcdserverpb.KV/Range"), created on first use.
  MethodStats& Method(const char* full_method, grpc::experimental::ServerRpcInfo::Type type);
  // Creates the stats of every method of `service` ("etcdserverpb.KV"), a service compiled into
  // this binary (its descriptor is in protobuf's generated pool; asserted).
  void PreRegister(std::string_view service);
  void AddFencingToken() { fencing_tokens_.fetch_add(1, std::memory_order_relaxed); }
  void AddReceivedBytes(std::size_t n) { received_bytes_.fetch_add(n, std::memory_order_relaxed); }
  void AddSentBytes(std::size_t n) { sent_bytes_.fetch_add(n, std::memory_order_relaxed); }

  void Render(MetricsText& m) const;

  // Go's name of a status code (codes.Code.String()).
  static const char* CodeName(int code);

 private:
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<MethodStats>, std::less<>> methods_;  // guarded by mu_
  std::atomic<std::uint64_t> received_bytes_{0};
  std::atomic<std::uint64_t> sent_bytes_{0};
  std::atomic<std::uint64_t> fencing_tokens_{0};
};

}  // namespace epoch::server
