// History vocabulary of the revision checker (revision_checker.h): etcd operations as a client
// saw them, with the revisions the server returned.
//
// An operation is a `RevOp` = `Operation<RevInput, RevOutput>` (history.h): client, call time,
// return time (kNeverReturned when the outcome is unknown), input, output. Inputs mirror etcd's
// KV service: Range (one key or [key, range_end)), Put, DeleteRange, and Txn with value/absence
// compares and a then- and an else-branch of puts and deletes. Outputs carry the header revision
// and, for a Range, every returned key-value with its create_revision, mod_revision and version.
//
// Who builds them: the chaos register workload (from gRPC responses) and the unit tests.
//
// Values written should be unique across the history: an unknown-outcome write is known to have
// happened only when some read returns one of its values.
//
// Threading: plain values; no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "epoch/lincheck/history.h"

namespace epoch::lincheck {

// etcd's range_end "\0": every key >= key.
inline const std::string kRangeToEnd(1, '\0');

struct RevKeyValue {
  std::string key;
  std::string value;
  std::int64_t create_revision = 0;
  std::int64_t mod_revision = 0;
  std::int64_t version = 0;
  friend bool operator==(const RevKeyValue&, const RevKeyValue&) = default;
};

// A Txn compare: `key`'s value equals `value`, or (value == nullopt) the key does not exist
// (etcd: CREATE revision == 0).
struct RevCompare {
  std::string key;
  std::optional<std::string> value;
};

// A put of `key` = `value`, or a delete of `key` (range_end empty) or of [key, range_end).
struct RevMutation {
  bool is_delete = false;
  std::string key;
  std::string range_end;  // delete only
  std::string value;      // put only

  static RevMutation Put(std::string k, std::string v) {
    return {false, std::move(k), {}, std::move(v)};
  }
  static RevMutation Delete(std::string k, std::string end = {}) {
    return {true, std::move(k), std::move(end), {}};
  }
};

enum class RevOpKind : std::uint8_t { kRange, kPut, kDeleteRange, kTxn };

struct RevInput {
  RevOpKind kind = RevOpKind::kRange;
  std::string key;                   // kRange
  std::string range_end;             // kRange: empty = just `key`
  bool serializable = false;         // kRange: may be stale, so exempt from the real-time rules
  std::vector<RevCompare> compares;  // kTxn: all must hold for the then-branch
  std::vector<RevMutation> success;  // kPut / kDeleteRange: the one mutation; kTxn: then-branch
  std::vector<RevMutation> failure;  // kTxn: else-branch

  static RevInput Range(std::string k, std::string end = {}, bool serializable = false);
  static RevInput Put(std::string k, std::string v);
  static RevInput DeleteRange(std::string k, std::string end = {});
  static RevInput Txn(std::vector<RevCompare> compares, std::vector<RevMutation> success,
                      std::vector<RevMutation> failure = {});
};

struct RevOutput {
  std::int64_t header_revision = 0;
  bool succeeded = true;         // kTxn: which branch ran
  std::int64_t deleted = 0;      // kDeleteRange, kTxn: keys deleted by the branch that ran
  std::vector<RevKeyValue> kvs;  // kRange, sorted by key
};

using RevOp = Operation<RevInput, RevOutput>;

// "[key, end)" or "key": the keys a range or delete covers.
[[nodiscard]] bool InRange(const std::string& key, const std::string& begin,
                           const std::string& end);

// One line: client, interval, input and output, e.g.
// `client 2 [10, 20] put(x, "a") -> rev 5`.
[[nodiscard]] std::string DescribeRevOp(const RevOp& op);

}  // namespace epoch::lincheck
