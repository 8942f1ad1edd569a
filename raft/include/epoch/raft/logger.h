// Logger: the injected sink for the Raft core's diagnostic messages (elections, step-downs,
// rejected snapshots). The core never performs I/O itself; the driver (server/) adapts this to
// spdlog, tests leave it null. Logging never changes behaviour: the core formats a message only
// when a logger is set, and nothing it does depends on the logger.
//
// Threading: called only from the thread that drives the core (inside Tick/Step/...); an
// implementation shared between several cores must synchronise itself.
#pragma once

#include <cstdint>
#include <string_view>

#include "epoch/raft/types.h"

namespace epoch::raft {

enum class LogLevel : std::uint8_t { kDebug, kInfo, kWarning, kError };

class Logger {
 public:
  virtual ~Logger() = default;
  // `node` and `term` are the core's identity and current term at the time of the event.
  virtual void Log(LogLevel level, NodeId node, Term term, std::string_view message) = 0;
};

}  // namespace epoch::raft
