// Workloads of epoch_bench: what each operation sends over the etcd v3 KV API and how its reply is
// read. No I/O here: the load runner calls these to fill requests and interpret responses.
//
// Callers: LoadRunner (one call per operation, from the thread that owns the client). KeySpace and
// the Build* functions are stateless and thread-safe; CasCache belongs to one thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcdserverpb/rpc.pb.h"

namespace epoch::bench {

enum class Workload {
  kPut,              // Put{key, value}
  kGet,              // Range{key}: linearizable (serializable = false)
  kGetSerializable,  // Range{key, serializable = true}: any member answers from its own state
  kTxnCasMod,        // Txn{if mod_revision(key) == expected then Put else Range}
  kTxnCasValue,      // Txn{if value(key) == expected then Put else Range}
};

std::optional<Workload> ParseWorkload(std::string_view name);
std::string_view WorkloadName(Workload w);
// Every accepted name, for --help.
std::string_view WorkloadNames();
bool IsCas(Workload w);

// Keys are prefix + index, the index zero-padded to 8 digits so keys sort by index.
class KeySpace {
 public:
  KeySpace(std::string prefix, std::uint64_t count) : prefix_(std::move(prefix)), count_(count) {}
  std::uint64_t count() const { return count_; }
  // Writes key number `index` (< count) into *out, reusing its capacity.
  void Format(std::uint64_t index, std::string* out) const;

 private:
  std::string prefix_;
  std::uint64_t count_;  // > 0
};

// Values of the value-compare CAS workload carry a version counter: 16 hex digits, then '.'
// padding up to the requested size. Put and get workloads use a fixed random value instead.
std::string EncodeCasValue(std::uint64_t counter, std::size_t size_bytes);
std::optional<std::uint64_t> DecodeCasValue(std::string_view value);
// A printable pseudo-random value of `size_bytes` (deterministic in `seed`).
std::string RandomValue(std::size_t size_bytes, std::uint64_t seed);

// What one thread believes each key's state is, for CAS: the mod revision (mod-compare) or the
// counter in the value (value-compare). A wrong belief only makes a CAS take its failure branch,
// whose Range reply then corrects it — exactly what a real CAS client does.
class CasCache {
 public:
  explicit CasCache(std::uint64_t key_count)
      : mod_revision_(key_count, 0), counter_(key_count, 0) {}
  std::int64_t mod_revision(std::uint64_t key) const { return mod_revision_[key]; }
  std::uint64_t counter(std::uint64_t key) const { return counter_[key]; }
  void set_mod_revision(std::uint64_t key, std::int64_t rev) { mod_revision_[key] = rev; }
  void set_counter(std::uint64_t key, std::uint64_t c) { counter_[key] = c; }

 private:
  std::vector<std::int64_t> mod_revision_;
  std::vector<std::uint64_t> counter_;
};

// Txn{compare: MOD(key) == expected; success: Put(key, value); failure: Range(key)}.
void BuildCasMod(const std::string& key, std::int64_t expected_mod_revision,
                 const std::string& value, etcdserverpb::TxnRequest* req);
// Txn{compare: VALUE(key) == expected_value; success: Put(key, new_value); failure: Range(key)}.
void BuildCasValue(const std::string& key, const std::string& expected_value,
                   const std::string& new_value, etcdserverpb::TxnRequest* req);

// Reads a CAS reply into the cache: on success the key's new mod revision is the header's
// revision and its counter is `written_counter`; on failure both come from the Range reply.
// Returns false if the reply is malformed (e.g. a failure branch without its Range).
bool ApplyCasReply(Workload w, std::uint64_t key, std::uint64_t written_counter,
                   const etcdserverpb::TxnResponse& resp, CasCache* cache);

}  // namespace epoch::bench
