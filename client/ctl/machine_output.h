// The machine-readable formats of etcdctl for one response: `json` (go_json.h), `fields`
// (fields_output.h) and `protobuf` (the response's wire bytes). Commands call PrintMachine first
// and print `simple` or `table` themselves when it returns false.
//
// Threading: whatever the Ctl's output allows (one command thread).
#pragma once

#include <string_view>

#include "ctl.h"
#include "fields_output.h"
#include "go_json.h"

namespace epoch::ctl {

// etcdctl's refusal of a format a command has no printer for (exit code 4).
inline Status FormatUnsupported(Ctl& ctl, std::string_view format) {
  return ctl.BadFeature(fmt::format("{} not supported as output format", format));
}

// Prints `r` when the format is json, fields or protobuf and returns true; false for simple and
// table. Fields for a response etcdctl has no fields printer for is refused as etcdctl does.
template <typename Response>
Result<bool> PrintMachine(Ctl& ctl, const Response& r) {
  switch (ctl.format()) {
    case OutputFormat::kJson: ctl.out() << GoJson(r) << "\n"; return true;
    case OutputFormat::kProtobuf: ctl.out() << r.SerializeAsString(); return true;
    case OutputFormat::kFields:
      if constexpr (requires { FieldsOf(r); }) {
        ctl.out() << FieldsOf(r);
        return true;
      } else {
        return FormatUnsupported(ctl, "fields");
      }
    case OutputFormat::kSimple:
    case OutputFormat::kTable: break;
  }
  return false;
}

}  // namespace epoch::ctl
