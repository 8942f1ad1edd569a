#include "revision_codec.h"

#include "epoch/byte_coding.h"

namespace epoch::server {

void AppendRevisionPair(std::string* out, RevisionPair rev) {
  PutBigEndian64(out, static_cast<std::uint64_t>(rev.main));
  PutBigEndian64(out, static_cast<std::uint64_t>(rev.sub));
}

bool DecodeRevisionPair(std::string_view in, RevisionPair* rev) {
  if (in.size() < kRevisionPairBytes) return false;
  rev->main = static_cast<std::int64_t>(GetBigEndian64(in.data()));
  rev->sub = static_cast<std::int64_t>(GetBigEndian64(in.data() + 8));
  return true;
}

std::string EncodeInt64(std::int64_t v) {
  std::string out;
  PutBigEndian64(&out, static_cast<std::uint64_t>(v));
  return out;
}

bool DecodeInt64(std::string_view in, std::int64_t* v) {
  if (in.size() != 8) return false;
  *v = static_cast<std::int64_t>(GetBigEndian64(in.data()));
  return true;
}

}  // namespace epoch::server
