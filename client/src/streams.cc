#include "epoch/client/streams.h"

#include "grpc_status.h"

namespace epoch::client::internal {

Status StreamEndStatus(const grpc::Status& status, const std::string& endpoint) {
  if (status.ok()) return Status::Unavailable("stream to " + endpoint + " ended by the server");
  return Classify(status).status.Annotate("stream to " + endpoint);
}

bool RefusesToken(const Status& end_status) { return IsTokenRefusal(end_status); }

bool RefusesToken(const etcdserverpb::WatchResponse& response) {
  return response.canceled() && IsTokenRefusalText(response.cancel_reason());
}

}  // namespace epoch::client::internal
