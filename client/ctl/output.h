// Output helpers shared by the commands: protobuf messages as JSON (etcd's field names, the
// proto names), aligned ASCII tables (etcdctl -w table), IDs in etcdctl's hex forms, sizes.
//
// Threading: pure functions.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace epoch::ctl {

// One-line JSON of `message` with the .proto field names (etcd's: "header", "kvs",
// "create_revision", "TTL", ...); bytes are base64, 64-bit integers strings (proto3 JSON).
std::string Json(const google::protobuf::Message& message);

// +-----+-----+ framed table with upper-case headers, like etcdctl's tablewriter.
void PrintTable(std::ostream& out, const std::vector<std::string>& headers,
                const std::vector<std::vector<std::string>>& rows);

std::string LeaseHex(std::int64_t id);        // %016x
std::string MemberHex(std::uint64_t id);      // %x
std::string HumanBytes(std::uint64_t bytes);  // "20 kB", "1.2 MB" (etcdctl's humanize.Bytes)

}  // namespace epoch::ctl
