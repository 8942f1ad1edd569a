// Helpers of the metrics integration tests (metrics_*_test.cc): read one sample out of a
// Prometheus text page, and run promtool on a page.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "epoch/test_support/process.h"

namespace epoch::integration {

inline constexpr const char* kPromtoolPath = "/usr/bin/promtool";
inline constexpr const char* kPrometheusPath = "/usr/bin/prometheus";

// The value of the first sample of `name` whose label text contains every one of `labels`
// (e.g. {"grpc_method=\"Put\"", "grpc_code=\"OK\""}); nullopt when there is none.
std::optional<double> SampleValue(const std::string& page, std::string_view name,
                                  const std::vector<std::string>& labels = {});
// The sum of every sample of `name` matching `labels`; nullopt when there is none.
std::optional<double> SampleSum(const std::string& page, std::string_view name,
                                const std::vector<std::string>& labels = {});
// Whether the page has a sample of `name` (a histogram's name matches its _bucket lines).
bool HasMetric(const std::string& page, std::string_view name);

// `promtool check metrics` on the page.
test::CommandResult PromtoolCheckMetrics(const std::string& page);

}  // namespace epoch::integration
