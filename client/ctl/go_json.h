// JSON as etcdctl 3.4 prints it: Go's encoding/json applied to the gogo-generated structs of
// etcd's protos and to clientv3's wrapper structs. That is not proto3's JSON mapping:
//   - 64-bit integers and enums are numbers (proto3 JSON makes int64 a string, enums names);
//   - every field is `omitempty`: zero numbers, false, "", empty lists and unset messages vanish;
//   - keys are the .proto field names ("cluster_id", "peerURLs", "TTL");
//   - a oneof is an object under the Go name of the oneof ("Response") holding one member under
//     its Go field name ("ResponsePut");
//   - bytes are standard base64; strings are escaped as Go does (<, > and & as \u003c...).
// clientv3's wrappers (lease grant, keep-alive, time-to-live, list, watch) embed or rename the
// header; GoJsonObject builds those shapes from the same pieces.
//
// Threading: pure functions.
#pragma once

#include <google/protobuf/message.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace epoch::ctl {

// `message` as Go's json.Marshal prints the gogo struct.
std::string GoJson(const google::protobuf::Message& message);

// Length of the valid UTF-8 sequence at text[i] (1 for ASCII) and its rune in *rune; 0 when the
// bytes there are not valid UTF-8 (overlong, surrogate, beyond U+10FFFF or truncated).
std::size_t Utf8Rune(std::string_view text, std::size_t i, std::uint32_t* rune);

// A Go string literal as encoding/json writes it (HTML-safe, invalid UTF-8 as U+FFFD).
std::string GoJsonString(std::string_view text);

// Standard base64 with padding, as encoding/json writes []byte.
std::string GoJsonBytes(std::string_view bytes);

// A duration as Go's time.Duration.String prints it: "1.830873ms", "850µs", "2.5s", "1m0.5s".
std::string GoDuration(std::chrono::nanoseconds d);

// One JSON object built field by field, for clientv3's wrapper structs.
class GoJsonObject {
 public:
  // The fields of `message` inline, as Go flattens an embedded struct pointer; nothing when null.
  GoJsonObject& Embed(const google::protobuf::Message* message);
  // A field whose value is already JSON (always written: the wrappers' fields are not omitempty).
  GoJsonObject& Raw(std::string_view name, std::string_view json);
  GoJsonObject& Int(std::string_view name, std::int64_t value);
  GoJsonObject& Bool(std::string_view name, bool value);
  GoJsonObject& String(std::string_view name, std::string_view value);

  std::string Close() const { return "{" + body_ + "}"; }

 private:
  void Key(std::string_view name);
  std::string body_;
};

}  // namespace epoch::ctl
