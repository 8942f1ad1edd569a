// epochctl: the admin CLI of Epoch, etcdctl-style, on epoch::client::Client.
// Parsing is CLI11's; each subcommand runs inside its callback and reports through Ctl. Errors
// print one line "Error: <reason>" on stderr and exit non-zero.
//
// Signals: SIGINT and SIGTERM are blocked in every thread and taken by one sigwait thread,
// which requests the stop token every long-running command (watch, lock, elect, keep-alive)
// waits on; a second signal exits at once.
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <stop_token>
#include <thread>

#include "commands.h"
#include "ctl.h"

namespace {

void StartSignalThread(std::stop_source stop) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread([set, stop]() mutable {
    int signal = 0;
    for (int count = 0; count < 2; ++count) {
      if (sigwait(&set, &signal) != 0) return;
      if (count == 0) stop.request_stop();
    }
    std::_Exit(128 + signal);
  }).detach();
}

}  // namespace

int main(int argc, char** argv) {
  std::stop_source stop;
  StartSignalThread(stop);
  epoch::ctl::Ctl ctl(std::cout, stop.get_token());

  CLI::App app{"epochctl: command line client for Epoch (etcd v3 API compatible)", "epochctl"};
  app.fallthrough();
  app.require_subcommand(1);
  app.set_help_all_flag("--help-all", "Print the whole command tree");
  app.add_option("--endpoints", ctl.flags.endpoints,
                 "Comma separated gRPC endpoints (default: $EPOCH_ENDPOINTS or 127.0.0.1:2379)");
  app.add_option("--dial-timeout", ctl.flags.dial_timeout, "Dial timeout for client connections")
      ->capture_default_str();
  app.add_option("--command-timeout", ctl.flags.command_timeout,
                 "Timeout for short running commands (excluding dial timeout)")
      ->capture_default_str();
  app.add_option("-w,--write-out", ctl.flags.write_out,
                 "Output format: simple, json, table, fields, protobuf")
      ->capture_default_str();
  app.add_option("--cacert", ctl.flags.cacert,
                 "Verify certificates of TLS-enabled secure servers using this CA bundle");
  app.add_option("--cert", ctl.flags.cert,
                 "Identify secure client using this TLS certificate file");
  app.add_option("--key", ctl.flags.key, "Identify secure client using this TLS key file");
  app.add_flag("--insecure-skip-tls-verify", ctl.flags.insecure_skip_tls_verify,
               "Skip server certificate verification (CAUTION: for testing only)");
  app.add_flag("--insecure-transport{true}", ctl.flags.insecure_transport,
               "Disable transport security for client connections (default true; "
               "--insecure-transport=false for TLS with the system's roots)")
      ->capture_default_str();
  app.add_option("--user", ctl.flags.user,
                 "username[:password] for authentication (prompt if password is not supplied)");
  app.add_option("--password", ctl.flags.password,
                 "password for authentication (if this option is used, --user option shouldn't "
                 "include password)");

  epoch::ctl::RegisterKvCommands(app, ctl);
  epoch::ctl::RegisterTxnCommand(app, ctl);
  epoch::ctl::RegisterWatchCommand(app, ctl);
  epoch::ctl::RegisterLeaseCommands(app, ctl);
  epoch::ctl::RegisterLockCommand(app, ctl);
  epoch::ctl::RegisterElectCommand(app, ctl);
  epoch::ctl::RegisterClusterCommands(app, ctl);
  epoch::ctl::RegisterSnapshotCommands(app, ctl);
  epoch::ctl::RegisterJobsCommands(app, ctl);
  epoch::ctl::RegisterAuthCommands(app, ctl);
  epoch::ctl::RegisterSettingsCommands(app, ctl);
  epoch::ctl::RegisterCheckCommands(app, ctl);
  epoch::ctl::RegisterCompletionCommand(app, ctl);
  // etcdctl's `version`: the tool's version and the etcd API it speaks (scripts grep the latter).
  app.add_subcommand("version", "Prints the version of epochctl")->callback([] {
    std::cout << "epochctl version: " EPOCH_VERSION "\nAPI version: 3.4\n";
  });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::cerr << "Error: " << e.what() << "\n";
    return 1;
  }
  std::cout.flush();
  if (!ctl.status().ok() && !ctl.silent()) {
    std::cerr << "Error: " << epoch::ctl::ErrorLine(ctl.status()) << "\n";
  }
  return ctl.exit_code();
}
