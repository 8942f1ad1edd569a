#include "epoch/client/streams.h"

#include "grpc_status.h"

namespace epoch::client::internal {

Status StreamEndStatus(const grpc::Status& status, const std::string& endpoint) {
  if (status.ok()) return Status::Unavailable("stream to " + endpoint + " ended by the server");
  return Classify(status).status.Annotate("stream to " + endpoint);
}

}  // namespace epoch::client::internal
