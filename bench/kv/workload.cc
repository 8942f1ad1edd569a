#include "workload.h"

#include <fmt/format.h>

#include <array>
#include <charconv>

namespace epoch::bench {
namespace {

struct NamedWorkload {
  std::string_view name;
  Workload workload;
};
constexpr std::array<NamedWorkload, 5> kWorkloads{{
    {"put", Workload::kPut},
    {"get", Workload::kGet},
    {"get-serializable", Workload::kGetSerializable},
    {"txn-cas-mod", Workload::kTxnCasMod},
    {"txn-cas-value", Workload::kTxnCasValue},
}};

constexpr std::size_t kCounterDigits = 16;

}  // namespace

std::optional<Workload> ParseWorkload(std::string_view name) {
  for (const auto& w : kWorkloads) {
    if (w.name == name) return w.workload;
  }
  return std::nullopt;
}

std::string_view WorkloadName(Workload w) {
  for (const auto& n : kWorkloads) {
    if (n.workload == w) return n.name;
  }
  return "?";
}

std::string_view WorkloadNames() {
  return "put, get, get-serializable, txn-cas-mod, txn-cas-value";
}

bool IsCas(Workload w) { return w == Workload::kTxnCasMod || w == Workload::kTxnCasValue; }

void KeySpace::Format(std::uint64_t index, std::string* out) const {
  out->assign(prefix_);
  fmt::format_to(std::back_inserter(*out), "{:08d}", index);
}

std::string EncodeCasValue(std::uint64_t counter, std::size_t size_bytes) {
  std::string v = fmt::format("{:016x}", counter);
  if (v.size() < size_bytes) v.append(size_bytes - v.size(), '.');
  return v;
}

std::optional<std::uint64_t> DecodeCasValue(std::string_view value) {
  if (value.size() < kCounterDigits) return std::nullopt;
  std::uint64_t c = 0;
  const char* end = value.data() + kCounterDigits;
  auto [ptr, ec] = std::from_chars(value.data(), end, c, 16);
  if (ec != std::errc() || ptr != end) return std::nullopt;
  return c;
}

std::string RandomValue(std::size_t size_bytes, std::uint64_t seed) {
  static constexpr std::string_view kAlphabet =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::string v(size_bytes, ' ');
  std::uint64_t x = seed | 1;
  for (char& ch : v) {
    x ^= x << 13;  // xorshift64
    x ^= x >> 7;
    x ^= x << 17;
    ch = kAlphabet[x % kAlphabet.size()];
  }
  return v;
}

namespace {

etcdserverpb::Compare* StartCas(const std::string& key, etcdserverpb::TxnRequest* req) {
  req->Clear();
  etcdserverpb::Compare* c = req->add_compare();
  c->set_result(etcdserverpb::Compare::EQUAL);
  c->set_key(key);
  req->add_failure()->mutable_request_range()->set_key(key);
  return c;
}

}  // namespace

void BuildCasMod(const std::string& key, std::int64_t expected_mod_revision,
                 const std::string& value, etcdserverpb::TxnRequest* req) {
  etcdserverpb::Compare* c = StartCas(key, req);
  c->set_target(etcdserverpb::Compare::MOD);
  c->set_mod_revision(expected_mod_revision);
  etcdserverpb::PutRequest* put = req->add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
}

void BuildCasValue(const std::string& key, const std::string& expected_value,
                   const std::string& new_value, etcdserverpb::TxnRequest* req) {
  etcdserverpb::Compare* c = StartCas(key, req);
  c->set_target(etcdserverpb::Compare::VALUE);
  c->set_value(expected_value);
  etcdserverpb::PutRequest* put = req->add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(new_value);
}

bool ApplyCasReply(Workload w, std::uint64_t key, std::uint64_t written_counter,
                   const etcdserverpb::TxnResponse& resp, CasCache* cache) {
  if (resp.succeeded()) {
    cache->set_mod_revision(key, resp.header().revision());
    if (w == Workload::kTxnCasValue) cache->set_counter(key, written_counter);
    return true;
  }
  if (resp.responses_size() != 1 || !resp.responses(0).has_response_range()) return false;
  const etcdserverpb::RangeResponse& range = resp.responses(0).response_range();
  if (range.kvs_size() == 0) {  // key absent: a mod compare against 0 succeeds next time
    cache->set_mod_revision(key, 0);
    return true;
  }
  const mvccpb::KeyValue& kv = range.kvs(0);
  cache->set_mod_revision(key, kv.mod_revision());
  if (w == Workload::kTxnCasValue) {
    std::optional<std::uint64_t> c = DecodeCasValue(kv.value());
    if (!c) return false;
    cache->set_counter(key, *c);
  }
  return true;
}

}  // namespace epoch::bench
