// The bound on the keys a txn with writes may visit at apply time (--max-txn-read-keys). Its
// reads run on the Raft thread, so an unbounded one would stall replication for everyone; the
// proposing member stamps the bound into the log entry so every replica applies the same one.
//
// Thread-safety: a value type.
#pragma once

#include <cstdint>

#include "epoch/v1/internal.pb.h"

namespace epoch::server {

struct TxnReadBound {
  // The keys the txn's reads may visit, all of them together; 0: no bound.
  std::int64_t max_keys = 0;
  // Whether the keys its compares visit count as well (a compare over a range reads every key
  // in it). False in entries from proposers that bounded the Range ops only: those replay with
  // the bound they were applied with.
  bool counts_compares = false;

  static TxnReadBound Of(const v1::InternalRequest& r) {
    return {r.txn_read_keys_max(), r.txn_read_bound_counts_compares()};
  }
};

}  // namespace epoch::server
