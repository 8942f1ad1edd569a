#include "metrics_support.h"

#include <chrono>
#include <sstream>

namespace epoch::integration {
namespace {

// Calls fn(value) for each sample line of `name` (exactly that name) matching `labels`.
template <typename Fn>
void ForEachSample(const std::string& page, std::string_view name,
                   const std::vector<std::string>& labels, Fn fn) {
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#' || !line.starts_with(name)) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != ' ' && next != '{') continue;
    const std::size_t space = line.rfind(' ');
    const std::string label_text = line.substr(name.size(), space - name.size());
    bool match = true;
    for (const std::string& l : labels) match = match && label_text.find(l) != std::string::npos;
    if (match) fn(std::stod(line.substr(space + 1)));
  }
}

}  // namespace

std::optional<double> SampleValue(const std::string& page, std::string_view name,
                                  const std::vector<std::string>& labels) {
  std::optional<double> out;
  ForEachSample(page, name, labels, [&](double v) {
    if (!out) out = v;
  });
  return out;
}

std::optional<double> SampleSum(const std::string& page, std::string_view name,
                                const std::vector<std::string>& labels) {
  std::optional<double> out;
  ForEachSample(page, name, labels, [&](double v) { out = out.value_or(0) + v; });
  return out;
}

bool HasMetric(const std::string& page, std::string_view name) {
  bool found = false;
  ForEachSample(page, name, {}, [&](double) { found = true; });
  ForEachSample(page, std::string(name) + "_bucket", {}, [&](double) { found = true; });
  return found;
}

test::CommandResult PromtoolCheckMetrics(const std::string& page) {
  return test::RunCommand({kPromtoolPath, "check", "metrics"}, page, std::chrono::seconds(20));
}

}  // namespace epoch::integration
