// epoch-wal: offline verify / dump / repair of a node's WAL directory (wal/README.md).
//
//   epoch-wal verify <dir>
//   epoch-wal dump <dir> [--data]
//   epoch-wal repair <dir> --truncate-after-corruption [--yes]
//
// Exit codes: 0 OK, 1 the WAL is damaged (verify) or the repair was not done, 2 usage or I/O
// error. Run it only while the node is stopped (it takes the directory lock).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "epoch/wal/inspect.h"
#include "epoch/wal/posix_file_system.h"

namespace {

using epoch::wal::InspectReport;

std::string Hex(std::string_view data, std::size_t max_bytes) {
  std::string out;
  for (std::size_t i = 0; i < data.size() && i < max_bytes; ++i) {
    out += fmt::format("{:02x}", static_cast<unsigned char>(data[i]));
  }
  if (data.size() > max_bytes) out += "…";
  return out;
}

void PrintSummary(const InspectReport& r) {
  fmt::print("segments: {}\n", r.segments.size());
  for (const auto& s : r.segments) {
    fmt::print("  {}  {} bytes, {} frames, {} records, data ends at {}, max entry index {}\n",
               s.path, s.file_bytes, s.frames, s.records, s.end_offset, s.max_entry_index);
  }
  fmt::print("log: entries [{}, {}], snapshot {}@term {}, hard state term {} vote {} commit {}\n",
             r.first_index, r.last_index, r.snapshot.index, r.snapshot.term, r.hard_state.term,
             r.hard_state.vote, r.hard_state.commit);
  for (const auto& w : r.warnings) fmt::print("warning: {}\n", w);
  if (r.torn_path) {
    fmt::print("torn tail: {} bytes at offset {} of {} (never acknowledged; truncated on open)\n",
               r.torn_bytes, r.torn_offset, *r.torn_path);
  }
}

void PrintRecord(std::uint64_t seq, std::uint64_t offset,
                 const epoch::wal::format::DecodedRecord& rec, bool with_data) {
  namespace format = epoch::wal::format;
  std::string what;
  if (const auto* e = std::get_if<epoch::raft::Entry>(&rec.body)) {
    what = fmt::format("entry index={} term={} type={} bytes={}{}", e->index, e->term,
                       e->type == epoch::raft::EntryType::kNormal ? "normal" : "conf-change",
                       e->data.size(), with_data ? " data=" + Hex(e->data, 64) : "");
  } else if (const auto* hs = std::get_if<epoch::raft::HardState>(&rec.body)) {
    what = fmt::format("hard-state term={} vote={} commit={}", hs->term, hs->vote, hs->commit);
  } else if (const auto* s = std::get_if<format::SnapshotRecord>(&rec.body)) {
    what = fmt::format("snapshot index={} term={} voters={} learners={} discard_log={}",
                       s->meta.index, s->meta.term, s->meta.conf.voters.size(),
                       s->meta.conf.learners.size(), s->discard_log);
  } else if (const auto* t = std::get_if<format::TruncateRecord>(&rec.body)) {
    what = fmt::format("truncate from={}", t->index);
  } else {
    const auto& c = std::get<format::Checkpoint>(rec.body);
    what = fmt::format("checkpoint term={} vote={} commit={} snapshot={}@{} next_index={}",
                       c.hard_state.term, c.hard_state.vote, c.hard_state.commit, c.snapshot.index,
                       c.snapshot.term, c.next_index);
  }
  fmt::print("{:016}.wal @{:<10} {}\n", seq, offset, what);
}

int Verify(const std::string& dir, bool dump, bool with_data) {
  epoch::wal::PosixFileSystem fs;
  epoch::wal::RecordVisitor visitor;
  if (dump) {
    visitor = [with_data](std::uint64_t seq, std::uint64_t offset,
                          const epoch::wal::format::DecodedRecord& rec) {
      PrintRecord(seq, offset, rec, with_data);
    };
  }
  auto report = epoch::wal::Inspect(fs, dir, visitor);
  if (!report.ok()) {
    fmt::print(stderr, "error: {}\n", report.status().ToString());
    return 2;
  }
  PrintSummary(*report);
  if (!report->status.ok()) {
    fmt::print("RESULT: {}\n", report->status.ToString());
    return 1;
  }
  fmt::print("RESULT: OK\n");
  return 0;
}

int Repair(const std::string& dir, bool yes) {
  epoch::wal::PosixFileSystem fs;
  auto plan = epoch::wal::PlanRepair(fs, dir);
  if (!plan.ok()) {
    fmt::print(stderr, "error: {}\n", plan.status().ToString());
    return 2;
  }
  fmt::print("{}", plan->Describe());
  if (!plan->needed) return 0;
  if (!plan->possible) return 1;
  if (!yes) {
    fmt::print("dry run: nothing changed. Re-run with --yes to do this.\n");
    return 1;
  }
  if (auto s = epoch::wal::ExecuteRepair(fs, dir, *plan); !s.ok()) {
    fmt::print(stderr, "repair failed: {}\n", s.ToString());
    return 2;
  }
  fmt::print("repaired; the WAL now verifies.\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"epoch-wal: verify, dump or repair an Epoch WAL directory (node must be stopped)"};
  app.require_subcommand(1);
  std::string dir;
  bool with_data = false;
  bool truncate_after_corruption = false;
  bool yes = false;

  auto* verify = app.add_subcommand("verify", "check every segment; exit 1 if damaged");
  verify->add_option("dir", dir, "WAL directory")->required();
  auto* dump = app.add_subcommand("dump", "print every record, then the verify summary");
  dump->add_option("dir", dir, "WAL directory")->required();
  dump->add_flag("--data", with_data, "print the first 64 bytes of entry data in hex");
  auto* repair = app.add_subcommand(
      "repair", "cut the log at the first corruption, keeping copies of what is dropped");
  repair->add_option("dir", dir, "WAL directory")->required();
  repair
      ->add_flag("--truncate-after-corruption", truncate_after_corruption,
                 "required: the only repair there is")
      ->required();
  repair->add_flag("--yes", yes, "do it (without: print the plan only)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (verify->parsed()) return Verify(dir, false, false);
  if (dump->parsed()) return Verify(dir, true, with_data);
  return Repair(dir, yes);
}
