// The JSON mapping of etcd 3.4's grpc-gateway (grpc-gateway v1 with JSONPb{OrigName: true}):
// proto field names, 64-bit integers as strings, bytes as base64, enums by name, fields at their
// default value left out; a request may use either the proto or the lowerCamel name of a field,
// and fields the message does not have are ignored. Stream messages are wrapped one per line as
// {"result": ...}; errors are {"error": msg, "message": msg, "code": grpc_code} with the HTTP
// status grpc-gateway v1 maps the gRPC code to.
//
// Threading: pure functions, any thread.
#pragma once

#include <grpcpp/support/status.h>

#include <string>
#include <string_view>

#include "epoch/gateway/route_table.h"
#include "epoch/status.h"

namespace epoch::gateway {

// The request message of `route` serialized from a JSON body; an empty body is the empty message
// (as etcd's gateway reads it). InvalidArgument with the parser's message for a bad body.
[[nodiscard]] Result<std::string> JsonToRequest(const Route& route, std::string_view json);

// The response message of `route` (serialized bytes) as JSON. Corruption if the bytes do not parse.
[[nodiscard]] Result<std::string> ResponseToJson(const Route& route, std::string_view bytes);

// One message of a stream as grpc-gateway writes it: {"result":<json>} and a newline.
[[nodiscard]] std::string StreamResult(std::string_view json);

// A stream's error after its first message, as grpc-gateway v1 writes it:
// {"error":{"grpc_code":c,"http_code":h,"message":m,"http_status":"..."}} and a newline.
[[nodiscard]] std::string StreamError(const grpc::Status& status);

// The body of a failed call: {"error":m,"message":m,"code":c}.
[[nodiscard]] std::string ErrorBody(grpc::StatusCode code, std::string_view message);

// grpc-gateway v1's HTTPStatusFromCode.
[[nodiscard]] int HttpStatusFromCode(grpc::StatusCode code);

// A JSON string literal (quotes included) of `text`.
[[nodiscard]] std::string JsonQuote(std::string_view text);

}  // namespace epoch::gateway
