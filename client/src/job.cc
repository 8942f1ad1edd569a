#include "epoch/client/job.h"

#include <fmt/format.h>

#include <charconv>

namespace epoch::client {
namespace {

constexpr std::string_view kStagesPrefix = "stages=";

std::uint64_t Fnv1a(std::uint64_t hash, std::string_view bytes) {
  for (const unsigned char c : bytes) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

bool ParseInt(std::string_view text, std::int64_t* out) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && end == text.data() + text.size();
}

}  // namespace

Result<JobSpec> ParseJob(std::string id, std::string_view value) {
  const std::size_t eol = value.find('\n');
  const std::string_view first = value.substr(0, eol);
  if (!first.starts_with(kStagesPrefix)) {
    return Status::InvalidArgument(
        fmt::format("job {}: value must start with 'stages=a,b,...'", id));
  }
  JobSpec job{std::move(id), std::string(value), {}};
  std::string_view list = first.substr(kStagesPrefix.size());
  while (job.stages.size() <= kMaxStages) {
    const std::size_t comma = list.find(',');
    const std::string_view name = list.substr(0, comma);
    if (name.empty()) {
      return Status::InvalidArgument(fmt::format("job {}: empty stage name", job.id));
    }
    job.stages.emplace_back(name);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  if (job.stages.size() > kMaxStages) {
    return Status::InvalidArgument(fmt::format("job {}: more than {} stages", job.id, kMaxStages));
  }
  return job;
}

std::string EncodeJob(const std::vector<std::string>& stages, std::string_view body) {
  return fmt::format("{}{}\n{}", kStagesPrefix, fmt::join(stages, ","), body);
}

std::string IdempotencyKey(const JobSpec& job, std::int64_t stage) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  hash = Fnv1a(hash, job.id);
  hash = Fnv1a(hash, std::string_view("\0", 1));
  hash = Fnv1a(hash, job.payload);
  hash = Fnv1a(hash, std::string_view("\0", 1));
  hash = Fnv1a(hash, std::to_string(stage));
  return fmt::format("{:016x}", hash);
}

std::string EncodeEpochRecord(const EpochRecord& record) {
  return fmt::format("epoch={} token={}", record.epoch, record.token.value());
}

Result<EpochRecord> ParseEpochRecord(std::string_view value) {
  const std::size_t space = value.find(' ');
  const std::string_view epoch = value.substr(0, space);
  const std::string_view token =
      space == std::string_view::npos ? std::string_view() : value.substr(space + 1);
  std::int64_t e = 0;
  std::int64_t t = 0;
  if (!epoch.starts_with("epoch=") || !token.starts_with("token=") ||
      !ParseInt(epoch.substr(6), &e) || !ParseInt(token.substr(6), &t) || e < 0 || t < 0) {
    return Status::Corruption(fmt::format("bad epoch record '{}'", value));
  }
  return EpochRecord{e, FencingToken(t)};
}

}  // namespace epoch::client
