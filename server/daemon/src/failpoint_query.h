// The one setting of a failpoint request: "/failpoint/<name>?key=value" (metrics listener,
// --enable-failpoints; disk_failpoint.h, clock_failpoint.h).
//
// Threading: a pure function.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace epoch::server {

struct FailpointQuery {
  std::string_view key;
  std::string_view value;
};

// The "?key=value" after the first `prefix_size` characters of `target`, or nullopt when there is
// none.
[[nodiscard]] inline std::optional<FailpointQuery> ParseFailpointQuery(std::string_view target,
                                                                       std::size_t prefix_size) {
  const std::string_view query = target.substr(prefix_size);
  const std::size_t eq = query.find('=');
  if (query.empty() || query[0] != '?' || eq == std::string_view::npos) return std::nullopt;
  return FailpointQuery{query.substr(1, eq - 1), query.substr(eq + 1)};
}

}  // namespace epoch::server
