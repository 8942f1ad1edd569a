#include "key_encoding.h"

#include "epoch/byte_coding.h"

namespace epoch::server {

namespace {

std::string WithTable(char table, std::string_view rest) {
  std::string out;
  out.reserve(1 + rest.size());
  out.push_back(table);
  out.append(rest);
  return out;
}

constexpr char kEscapeByte = '\x00';
constexpr char kEscapedZero = '\xff';
constexpr char kTerminator = '\x01';

}  // namespace

bool KeyRange::Contains(std::string_view k) const {
  switch (kind) {
    case Kind::kSingle: return k == key;
    case Kind::kFromKey: return k >= key;
    case Kind::kRange: return k >= key && k < end;
  }
  return false;
}

KeyRange MakeKeyRange(std::string_view key, std::string_view range_end) {
  KeyRange r;
  r.key = std::string(key);
  if (range_end.empty()) {
    r.kind = KeyRange::Kind::kSingle;
  } else if (range_end == std::string_view("\0", 1)) {
    r.kind = KeyRange::Kind::kFromKey;
  } else {
    r.kind = KeyRange::Kind::kRange;
    r.end = std::string(range_end);
  }
  return r;
}

std::string PrefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last != 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return end;
}

std::string MetaKey(std::string_view name) { return WithTable(kMetaTable, name); }

std::string LatestKey(std::string_view user_key) { return WithTable(kLatestTable, user_key); }

std::string_view UserKeyOfLatest(std::string_view stored_key) { return stored_key.substr(1); }

StoredBounds LatestBounds(const KeyRange& range) {
  StoredBounds b;
  b.lower = LatestKey(range.key);
  switch (range.kind) {
    case KeyRange::Kind::kSingle:
      // Only the key itself: the next possible key is key + "\0".
      b.upper = b.lower;
      b.upper.push_back('\0');
      break;
    case KeyRange::Kind::kFromKey: b.upper = std::string(1, kLatestTable + 1); break;
    case KeyRange::Kind::kRange: b.upper = LatestKey(range.end); break;
  }
  return b;
}

void AppendEscapedUserKey(std::string* out, std::string_view user_key) {
  for (char c : user_key) {
    out->push_back(c);
    if (c == kEscapeByte) out->push_back(kEscapedZero);
  }
  out->push_back(kEscapeByte);
  out->push_back(kTerminator);
}

bool ParseIndexKey(std::string_view stored_key, std::string* user_key, RevisionPair* rev) {
  if (stored_key.empty() || stored_key[0] != kIndexTable) return false;
  user_key->clear();
  std::size_t i = 1;
  while (i + 1 < stored_key.size()) {
    char c = stored_key[i];
    if (c != kEscapeByte) {
      user_key->push_back(c);
      ++i;
      continue;
    }
    if (stored_key[i + 1] == kEscapedZero) {
      user_key->push_back(kEscapeByte);
      i += 2;
      continue;
    }
    if (stored_key[i + 1] != kTerminator) return false;
    std::string_view rest = stored_key.substr(i + 2);
    return rest.size() == kRevisionPairBytes && DecodeRevisionPair(rest, rev);
  }
  return false;
}

std::string IndexKey(std::string_view user_key, RevisionPair rev) {
  std::string out(1, kIndexTable);
  AppendEscapedUserKey(&out, user_key);
  AppendRevisionPair(&out, rev);
  return out;
}

std::string RevisionKey(RevisionPair rev) {
  std::string out(1, kRevisionTable);
  AppendRevisionPair(&out, rev);
  return out;
}

bool ParseRevisionKey(std::string_view stored_key, RevisionPair* rev) {
  if (stored_key.size() != 1 + kRevisionPairBytes || stored_key[0] != kRevisionTable) return false;
  return DecodeRevisionPair(stored_key.substr(1), rev);
}

std::string LeaseKey(LeaseId id) {
  std::string out(1, kLeaseTable);
  PutBigEndian64(&out, static_cast<std::uint64_t>(id.value()));
  return out;
}

bool ParseLeaseKey(std::string_view stored_key, LeaseId* id) {
  if (stored_key.size() != 9 || stored_key[0] != kLeaseTable) return false;
  *id = LeaseId(static_cast<std::int64_t>(GetBigEndian64(stored_key.data() + 1)));
  return true;
}

std::string LeaseAttachPrefix(LeaseId id) {
  std::string out(1, kLeaseAttachTable);
  PutBigEndian64(&out, static_cast<std::uint64_t>(id.value()));
  return out;
}

std::string LeaseAttachKey(LeaseId id, std::string_view user_key) {
  std::string out = LeaseAttachPrefix(id);
  out.append(user_key);
  return out;
}

std::string IdempotencyKey(std::string_view record_key) {
  return WithTable(kIdempotencyTable, record_key);
}

std::string IdempotencyFreeFormRecord(std::string_view key) { return WithTable('k', key); }

std::string IdempotencySessionRecord(std::string_view client_id, std::uint64_t sequence) {
  std::string out(1, 's');
  out.push_back(static_cast<char>(static_cast<std::uint8_t>(client_id.size())));
  out.append(client_id);
  PutBigEndian64(&out, sequence);
  return out;
}

std::string IdempotencyWatermarkRecord(std::string_view client_id) {
  return WithTable('w', client_id);
}

bool ParseIdempotencySessionRecord(std::string_view record_key, std::string* client_id,
                                   std::uint64_t* sequence) {
  if (record_key.size() < 2 || record_key[0] != 's') return false;
  const std::size_t len = static_cast<std::uint8_t>(record_key[1]);
  if (record_key.size() != 2 + len + 8) return false;
  *client_id = std::string(record_key.substr(2, len));
  *sequence = GetBigEndian64(record_key.data() + 2 + len);
  return true;
}

std::string IdempotencyExpiryKey(std::int64_t expires_ms, std::string_view key) {
  std::string out(1, kIdempotencyExpiryTable);
  PutBigEndian64(&out, static_cast<std::uint64_t>(expires_ms));
  out.append(key);
  return out;
}

bool ParseIdempotencyExpiryKey(std::string_view stored_key, std::int64_t* expires_ms,
                               std::string* key) {
  if (stored_key.size() < 9 || stored_key[0] != kIdempotencyExpiryTable) return false;
  *expires_ms = static_cast<std::int64_t>(GetBigEndian64(stored_key.data() + 1));
  *key = std::string(stored_key.substr(9));
  return true;
}

StoredBounds TableBounds(char table) {
  return StoredBounds{std::string(1, table), std::string(1, static_cast<char>(table + 1))};
}

}  // namespace epoch::server
