// Ctl: global flags, client creation, durations and error lines (see ctl.h).
#include "ctl.h"

#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <ostream>
#include <sstream>

#include "epoch/etcd_errors.h"

namespace epoch::ctl {

Result<std::chrono::milliseconds> ParseDuration(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return Status::InvalidArgument(fmt::format("invalid duration \"{}\"", text));
  }
  const std::string unit = text.substr(used);
  double ms = 0;
  if (unit.empty() || unit == "s") {
    ms = value * 1000;
  } else if (unit == "ms") {
    ms = value;
  } else if (unit == "us") {
    ms = value / 1000;
  } else if (unit == "ns") {
    ms = value / 1e6;
  } else if (unit == "m") {
    ms = value * 60'000;
  } else if (unit == "h") {
    ms = value * 3'600'000;
  } else {
    return Status::InvalidArgument(
        fmt::format("invalid duration \"{}\" (unit ns|us|ms|s|m|h)", text));
  }
  if (!(ms >= 0) || ms > 1e12) {
    return Status::InvalidArgument(fmt::format("invalid duration \"{}\"", text));
  }
  return std::chrono::milliseconds(static_cast<std::int64_t>(ms));
}

Result<std::int64_t> ParseHexId(const std::string& text, const char* what) {
  if (text.empty() || text.size() > 16) {
    return Status::InvalidArgument(fmt::format("bad {} ID \"{}\" (hexadecimal)", what, text));
  }
  std::uint64_t value = 0;
  for (char c : text) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (c >= 'A' && c <= 'F') digit = c - 'A' + 10;
    if (digit < 0) {
      return Status::InvalidArgument(fmt::format("bad {} ID \"{}\" (hexadecimal)", what, text));
    }
    value = value * 16 + static_cast<std::uint64_t>(digit);
  }
  return static_cast<std::int64_t>(value);
}

std::string ErrorLine(const Status& status) {
  std::string message = status.message();
  const std::size_t etcd = message.find(etcd_errors::kMessagePrefix);
  if (etcd != std::string::npos) {
    message = message.substr(etcd);
    const std::size_t grpc = message.find(" (grpc ");
    if (grpc != std::string::npos) message.resize(grpc);
  }
  for (char& c : message) {
    if (c == '\n') c = ' ';
  }
  return message;
}

std::vector<std::string> Ctl::Endpoints() const {
  std::string list = flags.endpoints;
  if (list.empty()) {
    const char* env = std::getenv("EPOCH_ENDPOINTS");
    list = (env != nullptr && *env != '\0') ? env : "127.0.0.1:2379";
  }
  std::vector<std::string> endpoints;
  std::stringstream stream(list);
  std::string item;
  while (std::getline(stream, item, ',')) {
    if (!item.empty()) endpoints.push_back(item);
  }
  return endpoints;
}

Status Ctl::Prepare() {
  if (validated_) return Status::Ok();
  Result<std::chrono::milliseconds> dial = ParseDuration(flags.dial_timeout);
  if (!dial.ok()) return dial.status().Annotate("--dial-timeout");
  Result<std::chrono::milliseconds> command = ParseDuration(flags.command_timeout);
  if (!command.ok()) return command.status().Annotate("--command-timeout");
  if (dial->count() <= 0 || command->count() <= 0) {
    return Status::InvalidArgument("--dial-timeout and --command-timeout must be positive");
  }
  if (flags.write_out == "simple") {
    format_ = OutputFormat::kSimple;
  } else if (flags.write_out == "json") {
    format_ = OutputFormat::kJson;
  } else if (flags.write_out == "table") {
    format_ = OutputFormat::kTable;
  } else if (flags.write_out == "fields") {
    format_ = OutputFormat::kFields;
  } else if (flags.write_out == "protobuf") {
    format_ = OutputFormat::kProtobuf;
  } else {
    return BadFeature("unsupported output format");
  }
  if (Endpoints().empty()) return Status::InvalidArgument("no endpoints given");
  dial_timeout_ = *dial;
  command_timeout_ = *command;
  validated_ = true;
  return Status::Ok();
}

Result<std::unique_ptr<client::Client>> Ctl::ClientFor(std::vector<std::string> endpoints) {
  EPOCH_RETURN_IF_ERROR(Prepare());
  client::ClientOptions options;
  options.endpoints = std::move(endpoints);
  options.call_timeout = command_timeout_;
  options.dial_timeout = dial_timeout_;
  options.tls.enabled = !flags.insecure_transport;
  options.tls.ca_file = flags.cacert;
  options.tls.cert_file = flags.cert;
  options.tls.key_file = flags.key;
  options.tls.insecure_skip_verify = flags.insecure_skip_tls_verify;
  if (!credentials_) {
    Result<Credentials> resolved = ResolveCredentials(flags.user, flags.password, out_, std::cin);
    if (!resolved.ok()) return resolved.status();
    credentials_ = *resolved;
  }
  // As etcdctl's client: no password, no Authenticate (a client certificate may name the user).
  if (!credentials_->password.empty()) {
    options.user = credentials_->user;
    options.password = credentials_->password;
  }
  return client::Client::Create(std::move(options));
}

Result<client::Client*> Ctl::GetClient() {
  if (client_ == nullptr) {
    Result<std::unique_ptr<client::Client>> made = ClientFor(Endpoints());
    if (!made.ok()) return made.status();
    client_ = std::move(*made);
  }
  return client_.get();
}

client::CallOptions Ctl::Call() const {
  client::CallOptions call;
  call.timeout = command_timeout_;
  call.stop = stop_;
  return call;
}

client::CallOptions Ctl::CallWithoutTimeout() const {
  client::CallOptions call;
  call.timeout = std::chrono::hours(24 * 365);
  call.stop = stop_;
  return call;
}

Result<std::chrono::milliseconds> Ctl::CommandTimeout() const { return command_timeout_; }

OutputFormat Ctl::format() const { return format_; }

void Ctl::Finish(Status status, int exit_code) {
  if (status.ok() || !status_.ok()) return;
  status_ = std::move(status);
  exit_code_ = bad_feature_ ? kExitBadFeature : exit_code == 0 ? 1 : exit_code;
}

Status Ctl::BadFeature(std::string message) {
  bad_feature_ = true;
  return Status::InvalidArgument(std::move(message));
}

void Ctl::ExitWith(int exit_code) {
  if (exit_code == 0 || !status_.ok()) return;
  status_ = Status::Aborted(fmt::format("exit status {}", exit_code));
  exit_code_ = exit_code;
  silent_ = true;
}

}  // namespace epoch::ctl
