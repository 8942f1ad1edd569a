// The endpoint loop of the admin calls (client_admin.cc) for admin modules in other files
// (auth_admin.cc): start at the preferred endpoint, move on when an endpoint cannot be connected
// (and, for reads, after a transient failure), send the Client's auth token, and repeat once
// with a fresh token when the server refused it as expired.
//
// Private to client/. Threading: like Client.
#pragma once

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string_view>

#include "epoch/client/client.h"
#include "epoch/status.h"

namespace epoch::client::internal {

// One attempt on a channel; the caller's lambda keeps the response.
using AdminAttempt =
    std::function<grpc::Status(std::shared_ptr<grpc::Channel> channel, grpc::ClientContext*)>;

// `idempotent`: a read, retried on the next endpoint after a transient failure. Otherwise sent
// again only when the server provably did not act (OutcomeUnknown after an ambiguous failure).
Status CallAdmin(Client& client, std::string_view what, bool idempotent, const CallOptions& call,
                 const AdminAttempt& attempt);

}  // namespace epoch::client::internal
