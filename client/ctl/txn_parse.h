// etcdctl's txn syntax (etcdctl/ctlv3/command/txn_command.go), read from a stream:
//
//   compares, one per line:   <target>("<key>") <op> "<value>"
//        target: value|val, version|ver, create|c, mod|m, lease (value in hexadecimal)
//        op: =, !=, <, >          strings are Go-quoted ("a\"b" or `raw`)
//   an empty line
//   success requests, one per line:  put KEY VALUE [--lease=ID ...] | get KEY [flags] | del KEY
//   [flags] an empty line failure requests, same syntax an empty line (or end of input)
//
// Threading: pure functions.
#pragma once

#include <istream>
#include <ostream>
#include <string>

#include "epoch/status.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::ctl {

// Reads a Go-quoted string ("..." with escapes, or `...`) at text[*pos]; advances *pos past it.
Result<std::string> ReadQuoted(const std::string& text, std::size_t* pos);
// One compare line.
Result<etcdserverpb::Compare> ParseCompare(const std::string& line);
// One request line (put/get/del with their etcdctl flags).
Result<etcdserverpb::RequestOp> ParseRequestOp(const std::string& line);
// The whole transaction. With `prompts` (interactive), the section prompts go to `prompt_out`.
Result<etcdserverpb::TxnRequest> ParseTxn(std::istream& in, bool prompts, std::ostream& prompt_out);

}  // namespace epoch::ctl
