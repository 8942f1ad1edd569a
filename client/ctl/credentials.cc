// --user / --password and password prompts (see credentials.h).
#include "credentials.h"

#include <fmt/format.h>
#include <termios.h>
#include <unistd.h>

#include <iostream>
#include <optional>
#include <ostream>

namespace epoch::ctl {
namespace {

// Turns the terminal's echo off for its lifetime when stdin is a terminal.
class EchoOff {
 public:
  EchoOff() {
    if (isatty(STDIN_FILENO) == 0 || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios quiet = saved_;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    active_ = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) == 0;
  }
  ~EchoOff() {
    if (active_) tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved_);
  }
  EchoOff(const EchoOff&) = delete;
  EchoOff& operator=(const EchoOff&) = delete;

 private:
  termios saved_{};
  bool active_ = false;
};

}  // namespace

Result<std::string> AskPassword(const std::string& prompt, std::ostream& out, std::istream& in) {
  out << prompt << std::flush;
  std::string line;
  bool read = false;
  {
    std::optional<EchoOff> quiet;
    if (&in == &std::cin) quiet.emplace();
    read = static_cast<bool>(std::getline(in, line));
  }
  out << "\n" << std::flush;
  if (!read) return Status::InvalidArgument("failed to read the password: end of input");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

Result<std::string> AskNewPassword(const std::string& user, std::ostream& out, std::istream& in) {
  Result<std::string> first = AskPassword(fmt::format("Password of {}: ", user), out, in);
  if (!first.ok()) return first.status();
  if (first->empty()) return Status::InvalidArgument("empty password");
  Result<std::string> second =
      AskPassword(fmt::format("Type password of {} again for confirmation: ", user), out, in);
  if (!second.ok()) return second.status();
  if (*first != *second) return Status::InvalidArgument("given passwords are different");
  return first;
}

Result<Credentials> ResolveCredentials(const std::string& user_flag,
                                       const std::string& password_flag, std::ostream& out,
                                       std::istream& in) {
  if (user_flag.empty()) return Credentials{};
  if (!password_flag.empty()) return Credentials{user_flag, password_flag};
  const std::size_t colon = user_flag.find(':');
  if (colon != std::string::npos) {
    return Credentials{user_flag.substr(0, colon), user_flag.substr(colon + 1)};
  }
  Result<std::string> password = AskPassword("Password: ", out, in);
  if (!password.ok()) return password.status();
  return Credentials{user_flag, *password};
}

}  // namespace epoch::ctl
