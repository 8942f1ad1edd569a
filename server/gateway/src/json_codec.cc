#include "epoch/gateway/json_codec.h"

#include <fmt/format.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>

#include <memory>

#include "epoch/gateway/http_request.h"

namespace epoch::gateway {
namespace {

namespace pb = google::protobuf;

std::unique_ptr<pb::Message> NewMessage(const pb::Descriptor* descriptor) {
  const pb::Message* prototype = pb::MessageFactory::generated_factory()->GetPrototype(descriptor);
  return std::unique_ptr<pb::Message>(prototype->New());
}

}  // namespace

Result<std::string> JsonToRequest(const Route& route, std::string_view json) {
  std::unique_ptr<pb::Message> message = NewMessage(route.request());
  if (json.find_first_not_of(" \t\r\n") != std::string_view::npos) {
    pb::util::JsonParseOptions options;
    options.ignore_unknown_fields = true;  // grpc-gateway v1's default
    const auto status = pb::util::JsonStringToMessage(json, message.get(), options);
    if (!status.ok()) return Status::InvalidArgument(std::string(status.message()));
  }
  std::string bytes;
  if (!message->SerializeToString(&bytes)) {
    return Status::InvalidArgument("request does not serialize");
  }
  return bytes;
}

Result<std::string> ResponseToJson(const Route& route, std::string_view bytes) {
  std::unique_ptr<pb::Message> message = NewMessage(route.response());
  if (!message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return Status::Corruption(fmt::format("{} does not parse", route.response()->full_name()));
  }
  pb::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;  // OrigName: true
  std::string json;
  const auto status = pb::util::MessageToJsonString(*message, &json, options);
  if (!status.ok()) return Status::Corruption(std::string(status.message()));
  return json;
}

std::string StreamResult(std::string_view json) { return fmt::format("{{\"result\":{}}}\n", json); }

std::string StreamError(const grpc::Status& status) {
  const int http = HttpStatusFromCode(status.error_code());
  return fmt::format(
      "{{\"error\":{{\"grpc_code\":{},\"http_code\":{},\"message\":{},\"http_status\":{}}}}}\n",
      static_cast<int>(status.error_code()), http, JsonQuote(status.error_message()),
      JsonQuote(HttpReason(http)));
}

std::string ErrorBody(grpc::StatusCode code, std::string_view message) {
  const std::string quoted = JsonQuote(message);
  return fmt::format("{{\"error\":{},\"message\":{},\"code\":{}}}", quoted, quoted,
                     static_cast<int>(code));
}

int HttpStatusFromCode(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::OK: return 200;
    case grpc::StatusCode::CANCELLED: return 408;
    case grpc::StatusCode::INVALID_ARGUMENT: return 400;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return 504;
    case grpc::StatusCode::NOT_FOUND: return 404;
    case grpc::StatusCode::ALREADY_EXISTS: return 409;
    case grpc::StatusCode::PERMISSION_DENIED: return 403;
    case grpc::StatusCode::UNAUTHENTICATED: return 401;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return 429;
    case grpc::StatusCode::FAILED_PRECONDITION: return 412;
    case grpc::StatusCode::ABORTED: return 409;
    case grpc::StatusCode::OUT_OF_RANGE: return 400;
    case grpc::StatusCode::UNIMPLEMENTED: return 501;
    case grpc::StatusCode::UNAVAILABLE: return 503;
    default: return 500;  // UNKNOWN, INTERNAL, DATA_LOSS
  }
}

std::string JsonQuote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned char>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace epoch::gateway
