// epochctl's --user / --password (etcdctl's authCfgFromCmd) and its password prompts.
//
// Threading: the main thread (reads stdin, writes stdout).
#pragma once

#include <iosfwd>
#include <istream>
#include <string>

#include "epoch/status.h"

namespace epoch::ctl {

struct Credentials {
  std::string user;      // empty: no password auth (a client certificate may still name a user)
  std::string password;  // empty only without a user
};

// As etcdctl: no --user, no credentials; --password given, --user is the bare name; else
// "name:password", or a bare name whose password is asked on the terminal ("Password: ").
Result<Credentials> ResolveCredentials(const std::string& user_flag,
                                       const std::string& password_flag, std::ostream& out,
                                       std::istream& in);

// Writes `prompt` to `out` and reads one line from `in` with the terminal's echo off when `in`
// is stdin on a terminal; then a newline, as etcdctl's prompt library does.
Result<std::string> AskPassword(const std::string& prompt, std::ostream& out, std::istream& in);

// etcdctl's interactive password: asked twice, refused when empty or different.
Result<std::string> AskNewPassword(const std::string& user, std::ostream& out, std::istream& in);

}  // namespace epoch::ctl
