// Small helpers shared by the gRPC services: Status → grpc::Status with etcd's codes and
// messages, and response headers.
#pragma once

#include <grpcpp/grpcpp.h>

#include "epoch/etcd_errors.h"
#include "epoch/status.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::server {

inline grpc::Status ToGrpc(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(GrpcCodeFor(status)), status.message());
}

inline grpc::Status ToGrpc(const EtcdError& error) {
  return grpc::Status(static_cast<grpc::StatusCode>(error.code), std::string(error.message));
}

}  // namespace epoch::server
