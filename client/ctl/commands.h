// epochctl's command modules. Each Register* adds one group of subcommands to the app; every
// subcommand runs through Runner, which validates the global flags first and records the
// outcome in the Ctl (main prints "Error: ..." and sets the exit code).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "ctl.h"
#include "etcdserverpb/rpc.pb.h"

namespace epoch::ctl {

// The callback of a subcommand: Prepare(), then `fn`, then Finish.
inline std::function<void()> Runner(Ctl& ctl, std::function<Status()> fn) {
  return [&ctl, fn = std::move(fn)] {
    Status status = ctl.Prepare();
    if (status.ok()) status = fn();
    ctl.Finish(std::move(status));
  };
}

void RegisterKvCommands(CLI::App& app, Ctl& ctl);         // put get del compaction
void RegisterTxnCommand(CLI::App& app, Ctl& ctl);         // txn
void RegisterWatchCommand(CLI::App& app, Ctl& ctl);       // watch
void RegisterLeaseCommands(CLI::App& app, Ctl& ctl);      // lease ...
void RegisterLockCommand(CLI::App& app, Ctl& ctl);        // lock
void RegisterElectCommand(CLI::App& app, Ctl& ctl);       // elect
void RegisterClusterCommands(CLI::App& app, Ctl& ctl);    // member endpoint move-leader alarm
void RegisterSnapshotCommands(CLI::App& app, Ctl& ctl);   // snapshot ...
void RegisterJobsCommands(CLI::App& app, Ctl& ctl);       // jobs ...
void RegisterCompletionCommand(CLI::App& app, Ctl& ctl);  // completion bash
void RegisterAuthCommands(CLI::App& app, Ctl& ctl);       // auth user role
void RegisterSettingsCommands(CLI::App& app, Ctl& ctl);   // cluster timing
void RegisterCheckCommands(CLI::App& app, Ctl& ctl);      // check perf

// --- request builders shared by get/put/del and the txn parser (kv_commands.cc) ---

struct GetFlags {
  std::string key;
  std::string range_end;
  bool prefix = false;
  bool from_key = false;
  std::int64_t limit = 0;
  std::int64_t rev = 0;
  bool keys_only = false;
  bool count_only = false;
  bool print_value_only = false;
  std::string sort_by;
  std::string order;
  std::string consistency = "l";
};
struct PutFlags {
  std::string key;
  std::string value;
  std::string lease = "0";
  bool prev_kv = false;
  bool ignore_value = false;
  bool ignore_lease = false;
};
struct DelFlags {
  std::string key;
  std::string range_end;
  bool prefix = false;
  bool from_key = false;
  bool prev_kv = false;
};

void AddGetFlags(CLI::App& cmd, GetFlags& f);
void AddPutFlags(CLI::App& cmd, PutFlags& f);
void AddDelFlags(CLI::App& cmd, DelFlags& f);
Result<etcdserverpb::RangeRequest> BuildRange(const GetFlags& f);
Result<etcdserverpb::PutRequest> BuildPut(const PutFlags& f);
Result<etcdserverpb::DeleteRangeRequest> BuildDelete(const DelFlags& f);

// Simple (etcdctl-like) printers, also used for txn responses.
void PrintRange(std::ostream& out, const etcdserverpb::RangeResponse& r, const GetFlags& f);
void PrintPut(std::ostream& out, const etcdserverpb::PutResponse& r);
void PrintDelete(std::ostream& out, const etcdserverpb::DeleteRangeResponse& r);

}  // namespace epoch::ctl
