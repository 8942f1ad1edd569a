#include "clock_failpoint.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <charconv>

#include "failpoint_query.h"

namespace epoch::server {

HttpReply ClockFailpoint::Handle(std::string_view target) {
  const std::optional<FailpointQuery> query = ParseFailpointQuery(target, kPathPrefix.size());
  if (!query) return {400, "expected /failpoint/clock?rate=R (0 < R <= 2) or ?clear=1\n"};
  const std::string_view name = query->key;
  const std::string_view text = query->value;
  double rate = 1.0;
  if (name == "rate") {
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), rate);
    if (ec != std::errc() || ptr != text.data() + text.size()) {
      return {400, fmt::format("bad value in '{}': expected a number\n", target)};
    }
  } else if (name != "clear" || text != "1") {
    return {400, fmt::format("unknown clock failpoint '{}={}'\n", name, text)};
  }
  if (!clock_.SetRate(rate)) {
    return {400, fmt::format("rate must be in (0, {}], got '{}'\n", ScaledClock::kMaxRate, text)};
  }
  spdlog::warn("clock failpoint {}={}: tick clock rate now {}", name, text, rate);
  return {200, fmt::format("ok rate={}\n", rate)};
}

}  // namespace epoch::server
