// chaos_runner: the process-level chaos campaign (chaos/README.md), and — with --worker — the
// fenced worker process of its lock workload.
#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <climits>
#include <cstring>
#include <filesystem>

#include "epoch/chaos/campaign.h"
#include "epoch/chaos/lock_workload.h"

namespace {

std::string SelfExe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

std::string DefaultEpochd(const std::string& self) {
  // build/<dir>/chaos/chaos_runner -> build/<dir>/server/epochd
  std::filesystem::path p(self);
  return (p.parent_path().parent_path() / "server" / "epochd").string();
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--worker") == 0) return epoch::chaos::RunLockWorker(argc, argv);
  }
  CLI::App app{"chaos_runner: real epochd nodes, real faults, checked histories"};
  epoch::chaos::CampaignOptions o;
  o.self_exe = SelfExe();
  o.epochd_path = DefaultEpochd(o.self_exe);
  std::string raft_flags;
  long budget_ms = 30'000;
  app.add_option("--epochd", o.epochd_path, "The epochd binary (default: ../server/epochd)");
  app.add_option("--nodes", o.nodes, "Cluster size")->check(CLI::Range(3, 5));
  app.add_option("--rounds", o.rounds, "Rounds (a fresh cluster each)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--faults-per-round", o.faults_per_round, "Fault iterations per round")
      ->check(CLI::Range(1, 1000));
  app.add_option("--seed", o.seed, "Campaign seed (round r uses seed + r)");
  app.add_option("--only-round", o.only_round, "Run only this round of the campaign (re-run)");
  app.add_option("--faults", o.only_faults,
                 "Inject only these kinds, comma separated (e.g. kill-leader: a failover run)")
      ->delimiter(',');
  app.add_option("--raft-flags", raft_flags,
                 "epochd timing flags, space separated (default: TestCluster's fast timing)");
  app.add_option("--check-budget-ms", budget_ms, "Linearizability search limit per round")
      ->check(CLI::Range(100L, 3'600'000L));
  app.add_flag("--client-tls", o.client_tls,
               "Serve the client ports over TLS (--auto-tls certificates); clients speak TLS");
  app.add_flag("--peer-tls", o.peer_tls,
               "Peer links over mTLS: a test CA and a certificate per member (--peer-cert-file, "
               "--peer-client-cert-auth), through the fault proxies");
  app.add_option("--snapshot-count", o.snapshot_count,
                 "epochd --snapshot-count for every member (small: joining members catch up "
                 "from a snapshot); default: epochd's")
      ->check(CLI::Range(1, 100'000'000));
  app.add_flag("!--no-require-every-kind", o.require_every_kind,
               "Do not fail a short run that missed a fault kind");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (access(o.epochd_path.c_str(), X_OK) != 0) {
    fmt::print(stderr, "chaos_runner: no epochd at '{}' (use --epochd)\n", o.epochd_path);
    return 2;
  }
  for (std::size_t pos = 0; pos < raft_flags.size();) {
    std::size_t end = raft_flags.find(' ', pos);
    if (end == std::string::npos) end = raft_flags.size();
    if (end > pos) o.raft_flags.push_back(raft_flags.substr(pos, end - pos));
    pos = end + 1;
  }
  o.check_budget = std::chrono::milliseconds(budget_ms);
  return epoch::chaos::RunCampaign(o);
}
