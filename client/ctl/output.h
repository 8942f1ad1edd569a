// Output helpers shared by the commands (JSON is go_json.h): aligned ASCII tables (etcdctl -w
// table), IDs in etcdctl's hex forms, sizes.
//
// Threading: pure functions.
#pragma once

#include <google/protobuf/message.h>

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

namespace epoch::ctl {

// +-----+-----+ framed table like etcdctl's tablewriter: upper-case headers centred, cells
// right-aligned.
void PrintTable(std::ostream& out, const std::vector<std::string>& headers,
                const std::vector<std::vector<std::string>>& rows);

std::string LeaseHex(std::int64_t id);        // %016x
std::string MemberHex(std::uint64_t id);      // %x
std::string HumanBytes(std::uint64_t bytes);  // "20 kB", "1.2 MB" (etcdctl's humanize.Bytes)

}  // namespace epoch::ctl
