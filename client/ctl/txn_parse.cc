// The etcdctl txn syntax (see txn_parse.h).
#include "txn_parse.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "commands.h"

namespace epoch::ctl {

Result<std::string> ReadQuoted(const std::string& text, std::size_t* pos) {
  if (*pos >= text.size()) return Status::InvalidArgument("expected a quoted string");
  const char quote = text[*pos];
  if (quote != '"' && quote != '`') return Status::InvalidArgument("expected a quoted string");
  std::string out;
  for (std::size_t i = *pos + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == quote) {
      *pos = i + 1;
      return out;
    }
    if (c != '\\' || quote == '`') {
      out += c;
      continue;
    }
    if (++i >= text.size()) break;
    switch (text[i]) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '0': out += '\0'; break;
      case 'x': {
        if (i + 2 >= text.size()) return Status::InvalidArgument("bad \\x escape");
        const std::string hex = text.substr(i + 1, 2);
        char* end = nullptr;
        const long value = std::strtol(hex.c_str(), &end, 16);
        if (end != hex.c_str() + 2) return Status::InvalidArgument("bad \\x escape");
        out += static_cast<char>(value);
        i += 2;
        break;
      }
      default: out += text[i];  // \" \\ and the rest literally
    }
  }
  return Status::InvalidArgument("unterminated quoted string");
}

namespace {

void SkipSpaces(const std::string& text, std::size_t* pos) {
  while (*pos < text.size() && (text[*pos] == ' ' || text[*pos] == '\t')) ++*pos;
}

Result<std::int64_t> ParseInt(const std::string& text) {
  try {
    std::size_t used = 0;
    const long long value = std::stoll(text, &used, 10);
    if (used == text.size()) return static_cast<std::int64_t>(value);
  } catch (const std::exception&) {
  }
  return Status::InvalidArgument(fmt::format("invalid integer \"{}\"", text));
}

}  // namespace

Result<etcdserverpb::Compare> ParseCompare(const std::string& line) {
  auto malformed = [&line](const std::string& why) {
    return Status::InvalidArgument(fmt::format("malformed comparison: {} ({})", line, why));
  };
  const std::size_t paren = line.find('(');
  if (paren == std::string::npos) return malformed("no '('");
  std::string target = line.substr(0, paren);
  while (!target.empty() && target.front() == ' ') target.erase(0, 1);
  std::size_t pos = paren + 1;
  Result<std::string> key = ReadQuoted(line, &pos);
  if (!key.ok()) return malformed(key.status().message());
  if (pos >= line.size() || line[pos] != ')') return malformed("expected ')' after the key");
  ++pos;
  SkipSpaces(line, &pos);
  const std::size_t op_start = pos;
  while (pos < line.size() && line[pos] != ' ') ++pos;
  const std::string op = line.substr(op_start, pos - op_start);
  SkipSpaces(line, &pos);
  Result<std::string> value = ReadQuoted(line, &pos);
  if (!value.ok()) return malformed(value.status().message());
  SkipSpaces(line, &pos);
  if (pos != line.size()) return malformed("trailing characters");

  etcdserverpb::Compare compare;
  compare.set_key(*key);
  if (op == "=" || op == "==") {
    compare.set_result(etcdserverpb::Compare::EQUAL);
  } else if (op == "!=") {
    compare.set_result(etcdserverpb::Compare::NOT_EQUAL);
  } else if (op == "<") {
    compare.set_result(etcdserverpb::Compare::LESS);
  } else if (op == ">") {
    compare.set_result(etcdserverpb::Compare::GREATER);
  } else {
    return malformed(fmt::format("unknown operator \"{}\"", op));
  }
  if (target == "value" || target == "val") {
    compare.set_target(etcdserverpb::Compare::VALUE);
    compare.set_value(*value);
    return compare;
  }
  if (target == "lease") {
    Result<std::int64_t> lease = ParseHexId(*value, "lease");
    if (!lease.ok()) return malformed(lease.status().message());
    compare.set_target(etcdserverpb::Compare::LEASE);
    compare.set_lease(*lease);
    return compare;
  }
  Result<std::int64_t> number = ParseInt(*value);
  if (!number.ok()) return malformed(number.status().message());
  if (target == "version" || target == "ver") {
    compare.set_target(etcdserverpb::Compare::VERSION);
    compare.set_version(*number);
  } else if (target == "create" || target == "c") {
    compare.set_target(etcdserverpb::Compare::CREATE);
    compare.set_create_revision(*number);
  } else if (target == "mod" || target == "m") {
    compare.set_target(etcdserverpb::Compare::MOD);
    compare.set_mod_revision(*number);
  } else {
    return malformed(fmt::format("unknown target \"{}\"", target));
  }
  return compare;
}

Result<etcdserverpb::RequestOp> ParseRequestOp(const std::string& line) {
  std::string trimmed = line;
  while (!trimmed.empty() && trimmed.front() == ' ') trimmed.erase(0, 1);
  const std::size_t space = trimmed.find(' ');
  const std::string verb = trimmed.substr(0, space);
  const std::string rest = space == std::string::npos ? "" : trimmed.substr(space + 1);
  CLI::App parser(verb);
  GetFlags get;
  PutFlags put;
  DelFlags del;
  if (verb == "get") {
    AddGetFlags(parser, get);
  } else if (verb == "put") {
    AddPutFlags(parser, put);
  } else if (verb == "del" || verb == "delete") {
    AddDelFlags(parser, del);
  } else {
    return Status::InvalidArgument(fmt::format("invalid txn request: {} (get, put or del)", line));
  }
  try {
    parser.parse(rest, false);
  } catch (const CLI::ParseError& e) {
    return Status::InvalidArgument(fmt::format("invalid txn request: {}: {}", line, e.what()));
  }
  etcdserverpb::RequestOp op;
  if (verb == "get") {
    Result<etcdserverpb::RangeRequest> r = BuildRange(get);
    if (!r.ok()) return r.status();
    *op.mutable_request_range() = *r;
  } else if (verb == "put") {
    if (parser.count("value") == 0 && !put.ignore_value) {
      return Status::InvalidArgument(
          fmt::format("invalid txn request: {}: put needs a value", line));
    }
    Result<etcdserverpb::PutRequest> r = BuildPut(put);
    if (!r.ok()) return r.status();
    *op.mutable_request_put() = *r;
  } else {
    Result<etcdserverpb::DeleteRangeRequest> r = BuildDelete(del);
    if (!r.ok()) return r.status();
    *op.mutable_request_delete_range() = *r;
  }
  return op;
}

Result<etcdserverpb::TxnRequest> ParseTxn(std::istream& in, bool prompts,
                                          std::ostream& prompt_out) {
  etcdserverpb::TxnRequest txn;
  // Sections end at an empty line; the input is bounded by the stream (no loop without a read).
  auto section = [&](const char* prompt, auto&& add) -> Status {
    if (prompts) prompt_out << prompt << "\n" << std::flush;
    std::string line;
    while (std::getline(in, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty()) break;
      EPOCH_RETURN_IF_ERROR(add(line));
    }
    if (prompts) prompt_out << "\n";
    return Status::Ok();
  };
  EPOCH_RETURN_IF_ERROR(section("compares:", [&](const std::string& line) -> Status {
    Result<etcdserverpb::Compare> c = ParseCompare(line);
    if (!c.ok()) return c.status();
    *txn.add_compare() = *c;
    return Status::Ok();
  }));
  auto ops = [](auto* list) {
    return [list](const std::string& line) -> Status {
      Result<etcdserverpb::RequestOp> op = ParseRequestOp(line);
      if (!op.ok()) return op.status();
      *list->Add() = *op;
      return Status::Ok();
    };
  };
  EPOCH_RETURN_IF_ERROR(section("success requests (get, put, del):", ops(txn.mutable_success())));
  EPOCH_RETURN_IF_ERROR(section("failure requests (get, put, del):", ops(txn.mutable_failure())));
  return txn;
}

}  // namespace epoch::ctl
