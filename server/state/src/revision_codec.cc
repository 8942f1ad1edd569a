#include "revision_codec.h"

namespace epoch::server {

void PutFixed64BigEndian(std::string* out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) {
    out->push_back(static_cast<char>((v >> shift) & 0xff));
  }
}

std::uint64_t DecodeFixed64BigEndian(std::string_view in) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

void AppendRevisionPair(std::string* out, RevisionPair rev) {
  PutFixed64BigEndian(out, static_cast<std::uint64_t>(rev.main));
  PutFixed64BigEndian(out, static_cast<std::uint64_t>(rev.sub));
}

bool DecodeRevisionPair(std::string_view in, RevisionPair* rev) {
  if (in.size() < kRevisionPairBytes) return false;
  rev->main = static_cast<std::int64_t>(DecodeFixed64BigEndian(in));
  rev->sub = static_cast<std::int64_t>(DecodeFixed64BigEndian(in.substr(8)));
  return true;
}

std::string EncodeInt64(std::int64_t v) {
  std::string out;
  PutFixed64BigEndian(&out, static_cast<std::uint64_t>(v));
  return out;
}

bool DecodeInt64(std::string_view in, std::int64_t* v) {
  if (in.size() != 8) return false;
  *v = static_cast<std::int64_t>(DecodeFixed64BigEndian(in));
  return true;
}

}  // namespace epoch::server
