// Formatting of epoch_bench results: a human-readable block and a one-line JSON object that
// compare.sh reads with jq. Pure functions of their arguments.
//
// Callers: epoch_bench's main, after each phase. Thread-safe (no shared state).
#pragma once

#include <string>

#include "load_runner.h"

namespace epoch::bench {

struct RunDescription {
  std::string label;      // free text from --label ("" if none)
  std::string target;     // "all" or "leader"
  std::string endpoints;  // the endpoints actually used, comma-separated
};

std::string HumanReport(const LoadOptions& opts, const RunDescription& desc, const LoadResult& r);
std::string JsonReport(const LoadOptions& opts, const RunDescription& desc, const LoadResult& r);
// Escapes a string for a JSON string literal (quotes included).
std::string JsonString(const std::string& s);

}  // namespace epoch::bench
