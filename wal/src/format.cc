// Encoding and bounds-checked decoding of the WAL format (wal/FORMAT.md).
#include "epoch/wal/format.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cstring>

#include "epoch/crc32c.h"

namespace epoch::wal::format {

namespace {

void PutU8(std::string* out, std::uint8_t v) { out->push_back(static_cast<char>(v)); }

void PutU32(std::string* out, std::uint32_t v) {
  char buf[4];
  for (int i = 0; i < 4; ++i) buf[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(buf, 4);
}

void PutU64(std::string* out, std::uint64_t v) {
  char buf[8];
  for (int i = 0; i < 8; ++i) buf[i] = static_cast<char>((v >> (8 * i)) & 0xff);
  out->append(buf, 8);
}

std::uint32_t GetU32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

std::uint64_t GetU64(const char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint8_t>(p[i]);
  return v;
}

void SetU32(std::string* out, std::size_t pos, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) (*out)[pos + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// A cursor over untrusted bytes: every read checks bounds and latches failure.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool U8(std::uint8_t* v) {
    if (!Need(1)) return false;
    *v = static_cast<std::uint8_t>(in_[pos_++]);
    return true;
  }
  bool U32(std::uint32_t* v) {
    if (!Need(4)) return false;
    *v = GetU32(in_.data() + pos_);
    pos_ += 4;
    return true;
  }
  bool U64(std::uint64_t* v) {
    if (!Need(8)) return false;
    *v = GetU64(in_.data() + pos_);
    pos_ += 8;
    return true;
  }
  [[nodiscard]] std::string_view Rest() const { return in_.substr(pos_); }
  [[nodiscard]] bool AtEnd() const { return pos_ == in_.size(); }

 private:
  bool Need(std::size_t n) const { return in_.size() - pos_ >= n; }
  std::string_view in_;
  std::size_t pos_ = 0;
};

void PutHardState(std::string* out, const raft::HardState& hs) {
  PutU64(out, hs.term.value());
  PutU64(out, hs.vote.value());
  PutU64(out, hs.commit.value());
}

bool GetHardState(Reader& r, raft::HardState* hs) {
  std::uint64_t term = 0, vote = 0, commit = 0;
  if (!r.U64(&term) || !r.U64(&vote) || !r.U64(&commit)) return false;
  *hs = raft::HardState{Term(term), NodeId(vote), LogIndex(commit)};
  return true;
}

void PutSnapshotMeta(std::string* out, const raft::SnapshotMeta& m) {
  PutU64(out, m.index.value());
  PutU64(out, m.term.value());
  PutU32(out, static_cast<std::uint32_t>(m.conf.voters.size()));
  for (NodeId id : m.conf.voters) PutU64(out, id.value());
  PutU32(out, static_cast<std::uint32_t>(m.conf.learners.size()));
  for (NodeId id : m.conf.learners) PutU64(out, id.value());
}

bool GetNodeIds(Reader& r, std::vector<NodeId>* ids) {
  std::uint32_t n = 0;
  if (!r.U32(&n) || n > kConfMembersMax) return false;
  ids->clear();
  ids->reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    std::uint64_t id = 0;
    if (!r.U64(&id)) return false;
    ids->push_back(NodeId(id));
  }
  return true;
}

bool GetSnapshotMeta(Reader& r, raft::SnapshotMeta* m) {
  std::uint64_t index = 0, term = 0;
  if (!r.U64(&index) || !r.U64(&term)) return false;
  m->index = LogIndex(index);
  m->term = Term(term);
  return GetNodeIds(r, &m->conf.voters) && GetNodeIds(r, &m->conf.learners);
}

// Appends header + body for a record whose body the callback writes.
template <typename WriteBody>
void AppendRecord(std::string* out, RecordType type, WriteBody&& write_body) {
  const std::size_t start = out->size();
  out->append(kRecordHeaderBytes, '\0');
  write_body(out);
  const std::size_t body = out->size() - start - kRecordHeaderBytes;
  SetU32(out, start + 4, static_cast<std::uint32_t>(body));
  (*out)[start + 8] = static_cast<char>(type);
  const std::uint32_t crc = crc32c::Value(out->data() + start + 4, out->size() - start - 4);
  SetU32(out, start, crc32c::Mask(crc));
}

Result<RecordBody> DecodeBody(RecordType type, std::string_view body) {
  Reader r(body);
  switch (type) {
    case RecordType::kCheckpoint: {
      Checkpoint c;
      std::uint64_t next = 0;
      if (!GetHardState(r, &c.hard_state) || !GetSnapshotMeta(r, &c.snapshot) || !r.U64(&next) ||
          !r.AtEnd()) {
        break;
      }
      c.next_index = LogIndex(next);
      return RecordBody(std::move(c));
    }
    case RecordType::kEntry: {
      std::uint64_t index = 0, term = 0;
      std::uint8_t type_byte = 0;
      if (!r.U64(&index) || !r.U64(&term) || !r.U8(&type_byte) || type_byte > 1) break;
      return RecordBody(raft::Entry{Term(term), LogIndex(index),
                                    static_cast<raft::EntryType>(type_byte),
                                    std::string(r.Rest())});
    }
    case RecordType::kHardState: {
      raft::HardState hs;
      if (!GetHardState(r, &hs) || !r.AtEnd()) break;
      return RecordBody(hs);
    }
    case RecordType::kSnapshot: {
      SnapshotRecord s;
      std::uint8_t discard = 0;
      if (!GetSnapshotMeta(r, &s.meta) || !r.U8(&discard) || discard > 1 || !r.AtEnd()) break;
      s.discard_log = discard == 1;
      return RecordBody(std::move(s));
    }
    case RecordType::kTruncate: {
      std::uint64_t index = 0;
      if (!r.U64(&index) || !r.AtEnd()) break;
      return RecordBody(TruncateRecord{LogIndex(index)});
    }
  }
  return Status::Corruption(
      fmt::format("malformed {} record body ({} bytes)", RecordTypeName(type), body.size()));
}

}  // namespace

std::string_view RecordTypeName(RecordType type) {
  switch (type) {
    case RecordType::kCheckpoint: return "checkpoint";
    case RecordType::kEntry: return "entry";
    case RecordType::kHardState: return "hard-state";
    case RecordType::kSnapshot: return "snapshot";
    case RecordType::kTruncate: return "truncate";
  }
  return "unknown";
}

std::string SegmentFileName(std::uint64_t seq) { return fmt::format("{:016}.wal", seq); }

std::string PreallocFileName(std::uint64_t seq) {
  return fmt::format("{}{}", SegmentFileName(seq), kPreallocSuffix);
}

std::optional<std::uint64_t> ParseSegmentFileName(std::string_view name) {
  constexpr std::string_view kSuffix = ".wal";
  if (name.size() != 16 + kSuffix.size() || !name.ends_with(kSuffix)) return std::nullopt;
  std::uint64_t seq = 0;
  const auto [ptr, ec] = std::from_chars(name.data(), name.data() + 16, seq);
  if (ec != std::errc() || ptr != name.data() + 16 || seq == 0) return std::nullopt;
  return seq;
}

std::string EncodeSegmentHeader(std::uint64_t seq) {
  std::string out(kSegmentMagic);
  PutU32(&out, kVersion);
  PutU32(&out, 0);  // CRC, filled below
  PutU64(&out, seq);
  PutU64(&out, 0);
  std::uint32_t crc = crc32c::Value(out.data(), 12);
  crc = crc32c::Extend(crc, out.data() + 16, 16);
  SetU32(&out, 12, crc32c::Mask(crc));
  return out;
}

Status CheckSegmentHeader(std::string_view image, std::uint64_t expected_seq) {
  if (image.size() < kSegmentHeaderBytes) {
    return Status::Corruption(
        fmt::format("segment is {} bytes, shorter than its header", image.size()));
  }
  if (image.substr(0, 8) != kSegmentMagic) return Status::Corruption("bad segment magic");
  std::uint32_t crc = crc32c::Value(image.data(), 12);
  crc = crc32c::Extend(crc, image.data() + 16, 16);
  if (crc32c::Mask(crc) != GetU32(image.data() + 12)) {
    return Status::Corruption("bad segment header checksum");
  }
  if (GetU32(image.data() + 8) != kVersion) {
    return Status::Corruption(
        fmt::format("unsupported format version {}", GetU32(image.data() + 8)));
  }
  if (GetU64(image.data() + 16) != expected_seq) {
    return Status::Corruption(fmt::format("segment header says sequence {}, file name says {}",
                                          GetU64(image.data() + 16), expected_seq));
  }
  return Status::Ok();
}

void AppendCheckpointRecord(std::string* out, const Checkpoint& c) {
  AppendRecord(out, RecordType::kCheckpoint, [&](std::string* o) {
    PutHardState(o, c.hard_state);
    PutSnapshotMeta(o, c.snapshot);
    PutU64(o, c.next_index.value());
  });
}

void AppendEntryRecord(std::string* out, const raft::Entry& e) {
  AppendRecord(out, RecordType::kEntry, [&](std::string* o) {
    PutU64(o, e.index.value());
    PutU64(o, e.term.value());
    PutU8(o, static_cast<std::uint8_t>(e.type));
    o->append(e.data);
  });
}

std::uint64_t EntryRecordBytes(const raft::Entry& e) {
  return kRecordHeaderBytes + 17 + e.data.size();
}

void AppendHardStateRecord(std::string* out, const raft::HardState& hs) {
  AppendRecord(out, RecordType::kHardState, [&](std::string* o) { PutHardState(o, hs); });
}

void AppendSnapshotRecord(std::string* out, const SnapshotRecord& s) {
  AppendRecord(out, RecordType::kSnapshot, [&](std::string* o) {
    PutSnapshotMeta(o, s.meta);
    PutU8(o, s.discard_log ? 1 : 0);
  });
}

void AppendTruncateRecord(std::string* out, LogIndex index) {
  AppendRecord(out, RecordType::kTruncate, [&](std::string* o) { PutU64(o, index.value()); });
}

Result<DecodedRecord> DecodeRecord(std::string_view payload, std::uint64_t offset) {
  if (offset > payload.size() || payload.size() - offset < kRecordHeaderBytes) {
    return Status::Corruption(fmt::format("truncated record header at payload offset {}", offset));
  }
  const char* p = payload.data() + offset;
  const std::uint32_t body_len = GetU32(p + 4);
  if (body_len > kRecordBodyBytesMax ||
      payload.size() - offset - kRecordHeaderBytes < std::uint64_t{body_len}) {
    return Status::Corruption(
        fmt::format("record at payload offset {} claims {} body bytes", offset, body_len));
  }
  const std::uint32_t crc = crc32c::Value(p + 4, kRecordHeaderBytes - 4 + body_len);
  if (crc32c::Mask(crc) != GetU32(p)) {
    return Status::Corruption(fmt::format("bad record checksum at payload offset {}", offset));
  }
  const auto type_byte = static_cast<std::uint8_t>(p[8]);
  if (type_byte < 1 || type_byte > 5 || p[9] != 0 || p[10] != 0 || p[11] != 0) {
    return Status::Corruption(
        fmt::format("bad record type {} at payload offset {}", type_byte, offset));
  }
  const auto type = static_cast<RecordType>(type_byte);
  auto body = DecodeBody(type, std::string_view(p + kRecordHeaderBytes, body_len));
  if (!body.ok()) return body.status().Annotate(fmt::format("payload offset {}", offset));
  return DecodedRecord{offset, static_cast<std::uint32_t>(kRecordHeaderBytes + body_len),
                       std::move(body).value()};
}

Result<std::vector<DecodedRecord>> DecodePayload(std::string_view payload, std::uint32_t count) {
  std::vector<DecodedRecord> records;
  // Each record takes at least a header, so a corrupt count cannot reserve more than the bytes.
  records.reserve(std::min<std::uint64_t>(count, payload.size() / kRecordHeaderBytes));
  std::uint64_t offset = 0;
  for (std::uint32_t i = 0; i < count; ++i) {
    auto rec = DecodeRecord(payload, offset);
    if (!rec.ok()) return rec.status();
    offset += rec->bytes;
    records.push_back(std::move(rec).value());
  }
  if (offset != payload.size()) {
    return Status::Corruption(
        fmt::format("{} records end at payload offset {} of {}", count, offset, payload.size()));
  }
  return records;
}

std::string EncodeFrameHeader(std::uint64_t segment_seq, std::uint64_t offset,
                              std::uint32_t record_count, std::string_view payload) {
  std::string h;
  h.reserve(kFrameHeaderBytes);
  PutU32(&h, 0);  // CRC, filled below
  PutU32(&h, static_cast<std::uint32_t>(payload.size()));
  PutU64(&h, segment_seq);
  PutU64(&h, offset);
  PutU32(&h, record_count);
  PutU32(&h, kFrameMagic);
  std::uint32_t crc = crc32c::Value(h.data() + 4, kFrameHeaderBytes - 4);
  crc = crc32c::Extend(crc, payload.data(), payload.size());
  SetU32(&h, 0, crc32c::Mask(crc));
  return h;
}

FrameCheck CheckFrame(std::string_view image, std::uint64_t segment_seq, std::uint64_t offset,
                      FrameView* out, std::vector<DecodedRecord>* records, std::string* why) {
  if (offset > image.size() || image.size() - offset < kFrameHeaderBytes) {
    *why = "frame header runs past the end of the file";
    return FrameCheck::kInvalid;
  }
  const char* p = image.data() + offset;
  if (std::all_of(p, p + kFrameHeaderBytes, [](char c) { return c == 0; })) {
    return FrameCheck::kZero;
  }
  const std::uint32_t payload_len = GetU32(p + 4);
  if (GetU32(p + 28) != kFrameMagic) {
    *why = "bad frame magic";
    return FrameCheck::kInvalid;
  }
  if (GetU64(p + 8) != segment_seq || GetU64(p + 16) != offset) {
    *why = fmt::format("frame header names segment {} offset {}", GetU64(p + 8), GetU64(p + 16));
    return FrameCheck::kInvalid;
  }
  if (image.size() - offset - kFrameHeaderBytes < payload_len) {
    *why = fmt::format("frame payload of {} bytes runs past the end of the file", payload_len);
    return FrameCheck::kInvalid;
  }
  std::uint32_t crc = crc32c::Value(p + 4, kFrameHeaderBytes - 4);
  crc = crc32c::Extend(crc, p + kFrameHeaderBytes, payload_len);
  if (crc32c::Mask(crc) != GetU32(p)) {
    *why = "bad frame checksum";
    return FrameCheck::kInvalid;
  }
  const std::string_view payload(p + kFrameHeaderBytes, payload_len);
  const std::uint32_t count = GetU32(p + 24);
  auto decoded = DecodePayload(payload, count);
  if (!decoded.ok()) {
    *why = decoded.status().message();
    return FrameCheck::kInvalid;
  }
  if (records != nullptr) *records = std::move(decoded).value();
  *out = FrameView{offset, std::min<std::uint64_t>(FrameBytes(payload_len), image.size() - offset),
                   count, payload};
  return FrameCheck::kValid;
}

}  // namespace epoch::wal::format
