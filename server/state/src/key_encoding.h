// The RocksDB key layout of KvStore (server/README.md has the table). The first byte of every
// key names its table; StoreFamilies (store_reader.h) maps tables to column families, and one
// atomic write batch covers all of them:
//
//   'm' name                           -> int64 (applied index, revision, compact revision, clock)
//   'k' user_key                       -> mvccpb.KeyValue   (live keys at the current revision)
//   'i' esc(user_key) main sub         -> 'p' | 't'         (format 2 only: per-key history, now
//                                                            in memory, key_index.h; dropped on
//                                                            upgrade)
//   'r' main sub                       -> epoch.v1.StoredEvent (history in revision order)
//   'l' lease_id                       -> epoch.v1.StoredLease
//   'a' lease_id user_key              -> ""                (keys attached to a lease)
//   'd' record_key                     -> epoch.v1.StoredIdempotency, where record_key is
//       'k' free_form_key                                   (a free-form key's answer)
//       's' len(client_id) client_id seq                    (a session key's answer; len 1 byte)
//       'w' client_id                                       (a client's expired watermark)
//   'x' expires_ms record_key          -> ""                (idempotency expiry queue)
//
// esc() escapes 0x00 as 00 ff and terminates with 00 01, so encoded keys sort like the user keys
// and no encoded key is a prefix of another. Integers are big-endian, so bytewise order is
// numeric order.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "epoch/strong_int.h"
#include "revision_codec.h"

namespace epoch::server {

inline constexpr char kMetaTable = 'm';
inline constexpr char kLatestTable = 'k';
inline constexpr char kIndexTable = 'i';
inline constexpr char kRevisionTable = 'r';
inline constexpr char kLeaseTable = 'l';
inline constexpr char kLeaseAttachTable = 'a';
inline constexpr char kIdempotencyTable = 'd';
inline constexpr char kIdempotencyExpiryTable = 'x';

inline constexpr char kIndexPut = 'p';
inline constexpr char kIndexTombstone = 't';

// Meta names.
inline constexpr std::string_view kMetaAppliedIndex = "applied_index";
inline constexpr std::string_view kMetaRevision = "revision";
inline constexpr std::string_view kMetaCompactRevision = "compact_revision";
// Every record a compaction to this revision removes is gone (compaction.h); written by the
// compactor only, not part of the replicated state. Absent = -1 (a store from before it: the
// first open runs a pass, which finds nothing to remove).
inline constexpr std::string_view kMetaCompactFinished = "compact_finished";
inline constexpr std::string_view kMetaClusterTime = "cluster_time_ms";
inline constexpr std::string_view kMetaFormat = "format_version";
// epoch.v1.StoredAlarms; absent = no alarm (stores written before alarms existed).
inline constexpr std::string_view kMetaAlarms = "alarms";
// epoch.v1.StoredMembers; absent = nothing published yet.
inline constexpr std::string_view kMetaMembers = "members";
// epoch.v1.StoredAuth; absent = auth off, no users or roles.
inline constexpr std::string_view kMetaAuth = "auth";
// epoch.v1.StoredMemberTable (epoch/state/member_table.h); absent until the node seeds it.
inline constexpr std::string_view kMetaMemberTable = "member_table";
inline constexpr std::string_view kMetaClusterTiming = "cluster_timing";
// epoch.v1.StoredIdempotencyUsage; absent = the idempotency table is empty.
inline constexpr std::string_view kMetaIdempotencyUsage = "idempotency_usage";

// The user-key interval of a RangeRequest/DeleteRangeRequest/Compare (etcd's range_end rules).
struct KeyRange {
  enum class Kind { kSingle, kRange, kFromKey };
  Kind kind = Kind::kSingle;
  std::string key;
  std::string end;  // kRange only; exclusive

  [[nodiscard]] bool Contains(std::string_view k) const;
};

// range_end "" -> the single key; "\0" -> every key >= key; otherwise [key, range_end).
KeyRange MakeKeyRange(std::string_view key, std::string_view range_end);

// The smallest string greater than every string starting with `prefix`; "" when there is none
// (prefix empty or all 0xff).
std::string PrefixEnd(std::string_view prefix);

// A stored key interval [lower, upper) of one table.
struct StoredBounds {
  std::string lower;
  std::string upper;
};

std::string MetaKey(std::string_view name);

std::string LatestKey(std::string_view user_key);
std::string_view UserKeyOfLatest(std::string_view stored_key);
StoredBounds LatestBounds(const KeyRange& range);

void AppendEscapedUserKey(std::string* out, std::string_view user_key);
// Format 2's per-key history keys ('i' esc(user_key) main sub): what an upgrade drops, and what
// tests write to build a format-2 store. ParseIndexKey is false if malformed.
bool ParseIndexKey(std::string_view stored_key, std::string* user_key, RevisionPair* rev);
std::string IndexKey(std::string_view user_key, RevisionPair rev);

std::string RevisionKey(RevisionPair rev);
bool ParseRevisionKey(std::string_view stored_key, RevisionPair* rev);

std::string LeaseKey(LeaseId id);
bool ParseLeaseKey(std::string_view stored_key, LeaseId* id);
std::string LeaseAttachKey(LeaseId id, std::string_view user_key);
std::string LeaseAttachPrefix(LeaseId id);

std::string IdempotencyKey(std::string_view record_key);
// The record keys of the 'd' table (the layout above).
std::string IdempotencyFreeFormRecord(std::string_view key);
std::string IdempotencySessionRecord(std::string_view client_id, std::uint64_t sequence);
std::string IdempotencyWatermarkRecord(std::string_view client_id);
// Splits a session record key; false if `record_key` is not one.
bool ParseIdempotencySessionRecord(std::string_view record_key, std::string* client_id,
                                   std::uint64_t* sequence);
std::string IdempotencyExpiryKey(std::int64_t expires_ms, std::string_view key);
// Splits an expiry key; false if malformed.
bool ParseIdempotencyExpiryKey(std::string_view stored_key, std::int64_t* expires_ms,
                               std::string* key);

// The whole table `table`: ['t', 't'+1).
StoredBounds TableBounds(char table);

}  // namespace epoch::server
