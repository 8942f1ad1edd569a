// txn: an etcdctl-syntax transaction from stdin (txn_parse.h), interactive with -i.
#include <iostream>

#include "commands.h"
#include "go_json.h"
#include "machine_output.h"
#include "output.h"
#include "txn_parse.h"

namespace epoch::ctl {
namespace {

void PrintTxn(std::ostream& out, const etcdserverpb::TxnResponse& r) {
  out << (r.succeeded() ? "SUCCESS" : "FAILURE") << "\n";
  const GetFlags plain;
  for (const auto& op : r.responses()) {
    out << "\n";  // etcdctl: a blank line before each response, none after the last
    switch (op.response_case()) {
      case etcdserverpb::ResponseOp::kResponseRange:
        PrintRange(out, op.response_range(), plain);
        break;
      case etcdserverpb::ResponseOp::kResponsePut: PrintPut(out, op.response_put()); break;
      case etcdserverpb::ResponseOp::kResponseDeleteRange:
        PrintDelete(out, op.response_delete_range());
        break;
      default: out << "(nested txn)\n"; break;
    }
  }
}

Status RunTxn(Ctl& ctl, bool interactive) {
  Result<etcdserverpb::TxnRequest> txn = ParseTxn(std::cin, interactive, ctl.out());
  if (!txn.ok()) return txn.status();
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  Result<etcdserverpb::TxnResponse> response = (*client)->Txn(*txn, ctl.Call());
  if (!response.ok()) return response.status();
  Result<bool> printed = PrintMachine(ctl, *response);
  if (!printed.ok()) return printed.status();
  if (!*printed) {
    PrintTxn(ctl.out(), *response);
  }
  return Status::Ok();
}

}  // namespace

void RegisterTxnCommand(CLI::App& app, Ctl& ctl) {
  auto interactive = std::make_shared<bool>(false);
  CLI::App* cmd = app.add_subcommand(
      "txn", "Txn processes all the requests in one transaction (etcdctl syntax on stdin)");
  cmd->add_flag("-i,--interactive", *interactive, "Input transaction in interactive mode");
  cmd->callback(Runner(ctl, [&ctl, interactive] { return RunTxn(ctl, *interactive); }));
}

}  // namespace epoch::ctl
