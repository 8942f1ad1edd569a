#include "grpc_metrics.h"

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message_lite.h>
#include <grpcpp/support/byte_buffer.h>

#include <cassert>
#include <chrono>

#include "epoch/api/recipe_wait.h"

namespace epoch::server {
namespace {

using grpc::experimental::InterceptionHookPoints;
using grpc::experimental::ServerRpcInfo;

const char* TypeName(ServerRpcInfo::Type type) {
  switch (type) {
    case ServerRpcInfo::Type::UNARY: return "unary";
    case ServerRpcInfo::Type::CLIENT_STREAMING: return "client_stream";
    case ServerRpcInfo::Type::SERVER_STREAMING: return "server_stream";
    case ServerRpcInfo::Type::BIDI_STREAMING: return "bidi_stream";
  }
  return "unknown";
}

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(GrpcMetrics& metrics, GrpcMetrics::MethodStats& stats)
      : metrics_(metrics), stats_(stats), start_(std::chrono::steady_clock::now()) {
    stats_.started.fetch_add(1, std::memory_order_relaxed);
  }
  ~MetricsInterceptor() override {
    if (!handled_) Handled(grpc::StatusCode::CANCELLED);
  }
  MetricsInterceptor(const MetricsInterceptor&) = delete;
  MetricsInterceptor& operator=(const MetricsInterceptor&) = delete;

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // Null when the read found the stream closed: no message.
      if (const void* msg = methods->GetRecvMessage()) {
        stats_.msg_received.fetch_add(1, std::memory_order_relaxed);
        metrics_.AddReceivedBytes(
            static_cast<const google::protobuf::MessageLite*>(msg)->ByteSizeLong());
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      stats_.msg_sent.fetch_add(1, std::memory_order_relaxed);
      // The serialized form the call sends anyway (serialized here if not yet).
      if (grpc::ByteBuffer* buffer = methods->GetSerializedSendMessage()) {
        metrics_.AddSentBytes(buffer->Length());
      }
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::StatusCode code = methods->GetSendStatus().error_code();
      Handled(code);
      const auto* trailers = methods->GetSendTrailingMetadata();
      if (code == grpc::StatusCode::OK && trailers != nullptr &&
          trailers->count(kFencingTokenMetadata) > 0) {
        metrics_.AddFencingToken();
      }
    }
    methods->Proceed();
  }

 private:
  void Handled(grpc::StatusCode code) {
    handled_ = true;
    const auto index = static_cast<std::size_t>(code);
    if (index < GrpcMetrics::kCodes) {
      stats_.handled[index].fetch_add(1, std::memory_order_relaxed);
    }
    stats_.handling.Observe(std::chrono::steady_clock::now() - start_);
  }

  GrpcMetrics& metrics_;
  GrpcMetrics::MethodStats& stats_;
  const std::chrono::steady_clock::time_point start_;
  bool handled_ = false;  // a call's hook points are delivered one at a time
};

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(GrpcMetrics& metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, metrics_.Method(info->method(), info->type()));
  }

 private:
  GrpcMetrics& metrics_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
GrpcMetrics::InterceptorFactory() {
  return std::make_unique<MetricsInterceptorFactory>(*this);
}

GrpcMetrics::MethodStats& GrpcMetrics::Method(const char* full_method, ServerRpcInfo::Type type) {
  const std::string_view name = full_method != nullptr ? full_method : "";
  std::lock_guard lock(mu_);
  auto it = methods_.find(name);
  if (it != methods_.end()) return *it->second;
  auto stats = std::make_unique<MethodStats>();
  stats->type = TypeName(type);
  // "/package.Service/Method"
  const std::string_view trimmed = name.starts_with('/') ? name.substr(1) : name;
  const std::size_t slash = trimmed.rfind('/');
  stats->service = std::string(slash == std::string_view::npos ? "" : trimmed.substr(0, slash));
  stats->method =
      std::string(slash == std::string_view::npos ? trimmed : trimmed.substr(slash + 1));
  return *methods_.emplace(std::string(name), std::move(stats)).first->second;
}

void GrpcMetrics::PreRegister(std::string_view service) {
  const google::protobuf::ServiceDescriptor* descriptor =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(std::string(service));
  assert(descriptor != nullptr && "a served service's descriptor is compiled in");
  for (int i = 0; i < descriptor->method_count(); ++i) {
    const google::protobuf::MethodDescriptor* m = descriptor->method(i);
    ServerRpcInfo::Type type = ServerRpcInfo::Type::UNARY;
    if (m->client_streaming()) {
      type = m->server_streaming() ? ServerRpcInfo::Type::BIDI_STREAMING
                                   : ServerRpcInfo::Type::CLIENT_STREAMING;
    } else if (m->server_streaming()) {
      type = ServerRpcInfo::Type::SERVER_STREAMING;
    }
    Method(fmt::format("/{}/{}", service, m->name()).c_str(), type);
  }
}

const char* GrpcMetrics::CodeName(int code) {
  static constexpr std::array<const char*, kCodes> kNames = {
      "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
      "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
      "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
      "DataLoss", "Unauthenticated"};
  return code >= 0 && static_cast<std::size_t>(code) < kCodes ? kNames[code] : "Unknown";
}

void GrpcMetrics::Render(MetricsText& m) const {
  std::lock_guard lock(mu_);
  const auto labels = [](const MethodStats& s) {
    return MetricLabels{
        {"grpc_method", s.method}, {"grpc_service", s.service}, {"grpc_type", s.type}};
  };
  m.Header("grpc_server_started_total", "counter", "Total number of RPCs started on the server.");
  for (const auto& [name, s] : methods_) {
    m.Sample("grpc_server_started_total", labels(*s), s->started.load(std::memory_order_relaxed));
  }
  m.Header("grpc_server_handled_total", "counter",
           "Total number of RPCs completed on the server, regardless of success or failure.");
  for (const auto& [name, s] : methods_) {
    for (std::size_t code = 0; code < kCodes; ++code) {
      const std::uint64_t n = s->handled[code].load(std::memory_order_relaxed);
      // Every code of a known method, zeros included, as go-grpc-prometheus pre-registers them.
      MetricLabels l = labels(*s);
      l.insert(l.begin(), {"grpc_code", CodeName(static_cast<int>(code))});
      m.Sample("grpc_server_handled_total", l, n);
    }
  }
  m.Header("grpc_server_msg_received_total", "counter",
           "Total number of RPC stream messages received on the server.");
  for (const auto& [name, s] : methods_) {
    m.Sample("grpc_server_msg_received_total", labels(*s),
             s->msg_received.load(std::memory_order_relaxed));
  }
  m.Header("grpc_server_msg_sent_total", "counter",
           "Total number of gRPC stream messages sent by the server.");
  for (const auto& [name, s] : methods_) {
    m.Sample("grpc_server_msg_sent_total", labels(*s), s->msg_sent.load(std::memory_order_relaxed));
  }
  m.Header("grpc_server_handling_seconds", "histogram",
           "Histogram of response latency (seconds) of gRPC that had been application-level "
           "handled by the server.");
  for (const auto& [name, s] : methods_) {
    m.HistogramSamples("grpc_server_handling_seconds", labels(*s), s->handling);
  }
  m.Counter("epoch_fencing_tokens_issued_total",
            "Lock and Campaign calls answered with a fencing token (the epoch-fencing-token "
            "trailer).",
            fencing_tokens_.load(std::memory_order_relaxed));
  m.Counter("etcd_network_client_grpc_received_bytes_total",
            "The total number of bytes received from grpc clients.",
            received_bytes_.load(std::memory_order_relaxed));
  m.Counter("etcd_network_client_grpc_sent_bytes_total",
            "The total number of bytes sent to grpc clients.",
            sent_bytes_.load(std::memory_order_relaxed));
}

}  // namespace epoch::server
