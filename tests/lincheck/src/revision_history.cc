#include "epoch/lincheck/revision_history.h"

#include <fmt/format.h>

namespace epoch::lincheck {
namespace {

std::string Time(std::int64_t t) {
  return t == kNeverReturned ? std::string("never") : fmt::format("{}", t);
}

std::string Span(const std::string& key, const std::string& end) {
  if (end.empty()) return key;
  if (end == kRangeToEnd) return fmt::format("[{}, end)", key);
  return fmt::format("[{}, {})", key, end);
}

std::string Mutations(const std::vector<RevMutation>& ms) {
  std::string out;
  for (const RevMutation& m : ms) {
    if (!out.empty()) out += "; ";
    out += m.is_delete ? fmt::format("delete({})", Span(m.key, m.range_end))
                       : fmt::format("put({}, \"{}\")", m.key, m.value);
  }
  return out;
}

std::string Compares(const std::vector<RevCompare>& cs) {
  std::string out;
  for (const RevCompare& c : cs) {
    if (!out.empty()) out += " && ";
    out += c.value ? fmt::format("{} == \"{}\"", c.key, *c.value) : fmt::format("{} absent", c.key);
  }
  return out;
}

std::string Kvs(const std::vector<RevKeyValue>& kvs) {
  if (kvs.empty()) return "(none)";
  std::string out;
  for (const RevKeyValue& kv : kvs) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{}=\"{}\" (create {}, mod {}, version {})", kv.key, kv.value,
                       kv.create_revision, kv.mod_revision, kv.version);
  }
  return out;
}

std::string DescribeInput(const RevInput& in) {
  switch (in.kind) {
    case RevOpKind::kRange:
      return fmt::format("{}range({})", in.serializable ? "serializable " : "",
                         Span(in.key, in.range_end));
    case RevOpKind::kPut:
    case RevOpKind::kDeleteRange: return Mutations(in.success);
    case RevOpKind::kTxn:
      if (in.compares.empty() && in.failure.empty()) {
        return fmt::format("txn({})", Mutations(in.success));
      }
      return fmt::format("txn(if {} then {} else {})", Compares(in.compares), Mutations(in.success),
                         Mutations(in.failure));
  }
  return "?";
}

std::string DescribeOutput(const RevOp& op) {
  if (op.return_time == kNeverReturned) return "outcome unknown";
  const RevOutput& out = op.output;
  switch (op.input.kind) {
    case RevOpKind::kRange: return fmt::format("rev {}: {}", out.header_revision, Kvs(out.kvs));
    case RevOpKind::kPut: return fmt::format("rev {}", out.header_revision);
    case RevOpKind::kDeleteRange:
      return fmt::format("rev {}, deleted {}", out.header_revision, out.deleted);
    case RevOpKind::kTxn:
      return fmt::format("rev {}, {}, deleted {}", out.header_revision,
                         out.succeeded ? "succeeded" : "failed", out.deleted);
  }
  return "?";
}

}  // namespace

RevInput RevInput::Range(std::string k, std::string end, bool serializable) {
  RevInput in;
  in.kind = RevOpKind::kRange;
  in.key = std::move(k);
  in.range_end = std::move(end);
  in.serializable = serializable;
  return in;
}

RevInput RevInput::Put(std::string k, std::string v) {
  RevInput in;
  in.kind = RevOpKind::kPut;
  in.success.push_back(RevMutation::Put(std::move(k), std::move(v)));
  return in;
}

RevInput RevInput::DeleteRange(std::string k, std::string end) {
  RevInput in;
  in.kind = RevOpKind::kDeleteRange;
  in.success.push_back(RevMutation::Delete(std::move(k), std::move(end)));
  return in;
}

RevInput RevInput::Txn(std::vector<RevCompare> compares, std::vector<RevMutation> success,
                       std::vector<RevMutation> failure) {
  RevInput in;
  in.kind = RevOpKind::kTxn;
  in.compares = std::move(compares);
  in.success = std::move(success);
  in.failure = std::move(failure);
  return in;
}

bool InRange(const std::string& key, const std::string& begin, const std::string& end) {
  if (end.empty()) return key == begin;
  if (end == kRangeToEnd) return key >= begin;
  return key >= begin && key < end;
}

std::string DescribeRevOp(const RevOp& op) {
  return fmt::format("client {} [{}, {}] {} -> {}", op.client_id, Time(op.call_time),
                     Time(op.return_time), DescribeInput(op.input), DescribeOutput(op));
}

}  // namespace epoch::lincheck
