// etcdctl's `-w fields` printer (see fields_output.h).
#include "fields_output.h"

#include <fmt/format.h>

#include "go_json.h"

namespace epoch::ctl {
namespace {

std::string Bool(bool value) { return value ? "true" : "false"; }

std::string Line(std::string_view name, std::string_view value) {
  return fmt::format("\"{}\" : {}\n", name, value);
}

std::string Line(std::string_view name, std::int64_t value) {
  return Line(name, std::to_string(value));
}

std::string ULine(std::string_view name, std::uint64_t value) {
  return Line(name, std::to_string(value));
}

std::string Header(const etcdserverpb::ResponseHeader& h) {
  return ULine("ClusterID", h.cluster_id()) + ULine("MemberID", h.member_id()) +
         Line("Revision", h.revision()) + ULine("RaftTerm", h.raft_term());
}

std::string Kv(std::string_view prefix, const mvccpb::KeyValue& kv) {
  const auto name = [prefix](std::string_view field) { return fmt::format("{}{}", prefix, field); };
  return Line(name("Key"), GoQuote(kv.key())) + Line(name("CreateRevision"), kv.create_revision()) +
         Line(name("ModRevision"), kv.mod_revision()) + Line(name("Version"), kv.version()) +
         Line(name("Value"), GoQuote(kv.value())) + Line(name("Lease"), kv.lease());
}

// Go's unicode.IsPrint for the runes metadata holds in practice: C0/C1 controls, DEL, the soft
// hyphen, surrogates' neighbours and the line/paragraph separators are not printable.
bool Printable(std::uint32_t r) {
  if (r < 0x20 || (r >= 0x7f && r < 0xa0) || r == 0xad) return false;
  if (r == 0x2028 || r == 0x2029 || r == 0xfeff || (r >= 0xfff9 && r <= 0xfffb)) return false;
  return r != 0xfffe && r != 0xffff;
}

}  // namespace

std::string GoQuote(std::string_view text) {
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size();) {
    std::uint32_t r = 0;
    const std::size_t n = Utf8Rune(text, i, &r);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    switch (r) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\v': out += "\\v"; break;
      default:
        if (Printable(r)) {
          out.append(text.substr(i, n));
        } else if (r < 0x20 || r == 0x7f) {
          out += fmt::format("\\x{:02x}", r);
        } else if (r < 0x10000) {
          out += fmt::format("\\u{:04x}", r);
        } else {
          out += fmt::format("\\U{:08x}", r);
        }
    }
    i += n;
  }
  return out + "\"";
}

std::string FieldsOf(const etcdserverpb::RangeResponse& r) {
  std::string out = Header(r.header());
  for (const auto& kv : r.kvs()) out += Kv("", kv);
  return out + Line("More", Bool(r.more())) + Line("Count", r.count());
}

std::string FieldsOf(const etcdserverpb::PutResponse& r) {
  std::string out = Header(r.header());
  if (r.has_prev_kv()) out += Kv("Prev", r.prev_kv());
  return out;
}

std::string FieldsOf(const etcdserverpb::DeleteRangeResponse& r) {
  std::string out = Header(r.header()) + Line("Deleted", r.deleted());
  for (const auto& kv : r.prev_kvs()) out += Kv("Prev", kv);
  return out;
}

std::string FieldsOf(const etcdserverpb::TxnResponse& r) {
  std::string out = Header(r.header()) + Line("Succeeded", Bool(r.succeeded()));
  for (const auto& op : r.responses()) {
    switch (op.response_case()) {
      case etcdserverpb::ResponseOp::kResponseRange: out += FieldsOf(op.response_range()); break;
      case etcdserverpb::ResponseOp::kResponsePut: out += FieldsOf(op.response_put()); break;
      case etcdserverpb::ResponseOp::kResponseDeleteRange:
        out += FieldsOf(op.response_delete_range());
        break;
      default: out += Line("Unknown", GoQuote(op.ShortDebugString())); break;
    }
  }
  return out;
}

std::string FieldsOf(const etcdserverpb::WatchResponse& r) {
  std::string out = Header(r.header());
  for (const auto& event : r.events()) {
    out += Line("Type", mvccpb::Event::EventType_Name(event.type()));
    if (event.has_prev_kv()) out += Kv("Prev", event.prev_kv());
    out += Kv("", event.kv());
  }
  return out;
}

std::string FieldsOf(const etcdserverpb::LeaseRevokeResponse& r) { return Header(r.header()); }

std::string FieldsOf(const etcdserverpb::LeaseTimeToLiveResponse& r) {
  std::string out = Header(r.header()) + Line("ID", r.id()) + Line("TTL", r.ttl()) +
                    Line("GrantedTTL", r.grantedttl());
  for (const std::string& key : r.keys()) out += Line("Key", GoQuote(key));
  return out;
}

std::string FieldsOf(const etcdserverpb::LeaseLeasesResponse& r) {
  std::string out = Header(r.header());
  for (const auto& lease : r.leases()) out += Line("ID", lease.id());
  return out;
}

std::string FieldsOfLease(const etcdserverpb::ResponseHeader& header, std::int64_t id,
                          std::int64_t ttl) {
  return Header(header) + Line("ID", id) + Line("TTL", ttl);
}

std::string FieldsOf(const etcdserverpb::MemberListResponse& r) {
  std::string out = Header(r.header());
  for (const auto& m : r.members()) {
    out += ULine("ID", m.id()) + Line("Name", GoQuote(m.name()));
    for (const std::string& url : m.peerurls()) out += Line("PeerURL", GoQuote(url));
    for (const std::string& url : m.clienturls()) out += Line("ClientURL", GoQuote(url));
    out += Line("IsLearner", Bool(m.islearner())) + "\n";
  }
  return out;
}

std::string FieldsOf(const etcdserverpb::AlarmResponse& r) {
  std::string out = Header(r.header());
  for (const auto& alarm : r.alarms()) {
    out += ULine("MemberID", alarm.memberid()) +
           Line("AlarmType", etcdserverpb::AlarmType_Name(alarm.alarm())) + "\n";
  }
  return out;
}

std::string FieldsOf(const etcdserverpb::AuthUserAddResponse& r) { return Header(r.header()); }
std::string FieldsOf(const etcdserverpb::AuthUserDeleteResponse& r) { return Header(r.header()); }
std::string FieldsOf(const etcdserverpb::AuthUserChangePasswordResponse& r) {
  return Header(r.header());
}
std::string FieldsOf(const etcdserverpb::AuthUserGrantRoleResponse& r) {
  return Header(r.header());
}
std::string FieldsOf(const etcdserverpb::AuthUserRevokeRoleResponse& r) {
  return Header(r.header());
}
std::string FieldsOf(const etcdserverpb::AuthRoleAddResponse& r) { return Header(r.header()); }
std::string FieldsOf(const etcdserverpb::AuthRoleDeleteResponse& r) { return Header(r.header()); }
std::string FieldsOf(const etcdserverpb::AuthRoleGrantPermissionResponse& r) {
  return Header(r.header());
}
std::string FieldsOf(const etcdserverpb::AuthRoleRevokePermissionResponse& r) {
  return Header(r.header());
}

std::string FieldsOf(const etcdserverpb::AuthRoleGetResponse& r) {
  std::string out = Header(r.header());
  for (const authpb::Permission& perm : r.perm()) {
    // etcdctl: fmt.Println(`"PermType" : `, type) — Println adds a second space.
    out += Line("PermType", " " + authpb::Permission::Type_Name(perm.permtype())) +
           Line("Key", GoQuote(perm.key())) + Line("RangeEnd", GoQuote(perm.range_end()));
  }
  return out;
}

std::string FieldsOf(const etcdserverpb::AuthRoleListResponse& r) {
  std::string out = Header(r.header()) + "\"Roles\" :";
  for (const std::string& role : r.roles()) out += " " + GoQuote(role);
  return out + "\n";
}

std::string FieldsOf(const etcdserverpb::AuthStatusResponse& r) {
  return Header(r.header()) + Line("Enabled", Bool(r.enabled())) +
         ULine("AuthRevision", r.authrevision());
}

std::string FieldsOf(const std::vector<EndpointStatus>& statuses) {
  std::string out;
  for (const auto& [endpoint, s] : statuses) {
    std::string errors;
    for (const std::string& e : s.errors()) errors += (errors.empty() ? "" : " ") + e;
    out += Header(s.header()) + Line("Version", GoQuote(s.version())) + Line("DBSize", s.dbsize()) +
           ULine("Leader", s.leader()) + Line("IsLearner", Bool(s.islearner())) +
           ULine("RaftIndex", s.raftindex()) + ULine("RaftTerm", s.raftterm()) +
           ULine("RaftAppliedIndex", s.raftappliedindex()) + Line("Errors", "[" + errors + "]") +
           Line("Endpoint", GoQuote(endpoint)) + "\n";
  }
  return out;
}

std::string FieldsOf(const std::vector<EndpointHealth>& healths) {
  std::string out;
  for (const auto& h : healths) {
    out += Line("Endpoint", GoQuote(h.endpoint)) + Line("Health", Bool(h.health)) +
           Line("Took", h.took) + Line("Error", h.error) + "\n";
  }
  return out;
}

std::string FieldsOf(const std::vector<EndpointHashKV>& hashes) {
  std::string out;
  for (const auto& [endpoint, h] : hashes) {
    out +=
        Header(h.header()) + Line("Endpoint", GoQuote(endpoint)) + ULine("Hash", h.hash()) + "\n";
  }
  return out;
}

}  // namespace epoch::ctl
