// snapshot save (Maintenance.Snapshot to a file, verified), status (local file), restore
// (runs `epochd --restore-snapshot`, server/SNAPSHOT.md §2).
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "commands.h"
#include "epoch/client/admin.h"
#include "machine_output.h"
#include "output.h"
#include "snapshot_file.h"

namespace epoch::ctl {
namespace {

Status RunSave(Ctl& ctl, const std::string& path) {
  const std::vector<std::string> endpoints = ctl.Endpoints();
  if (endpoints.size() != 1) {
    return Status::InvalidArgument(
        fmt::format("snapshot must be requested to one selected node, not multiple {}",
                    fmt::join(endpoints, ",")));
  }
  Result<client::Client*> client = ctl.GetClient();
  if (!client.ok()) return client.status();
  const std::string part = path + ".part";
  std::ofstream file(part, std::ios::binary | std::ios::trunc);
  if (!file) return Status::IOError(fmt::format("cannot create {}", part));
  client::CallOptions call = ctl.CallWithoutTimeout();  // a large image takes its time
  Result<std::uint64_t> bytes = client::SaveSnapshot(
      **client,
      [&file, &part](std::string_view piece) {
        file.write(piece.data(), static_cast<std::streamsize>(piece.size()));
        return file ? Status::Ok() : Status::IOError(fmt::format("write to {} failed", part));
      },
      call);
  file.close();
  if (!bytes.ok()) {
    std::remove(part.c_str());
    return bytes.status();
  }
  if (!file) return Status::IOError(fmt::format("write to {} failed", part));
  Result<SnapshotInfo> info = ReadSnapshotInfo(part);
  if (!info.ok()) {
    std::remove(part.c_str());
    return info.status();
  }
  std::error_code ec;
  std::filesystem::rename(part, path, ec);
  if (ec) return Status::IOError(fmt::format("rename {} to {}: {}", part, path, ec.message()));
  if (ctl.format() == OutputFormat::kJson) {
    ctl.out() << fmt::format("{{\"path\":\"{}\",\"size\":{},\"revision\":{},\"sha256\":\"{}\"}}\n",
                             path, info->total_bytes, info->revision, info->sha256_hex);
  } else {
    ctl.out() << fmt::format("Snapshot saved at {}\n", path);
  }
  return Status::Ok();
}

// etcdctl's snapshot status: hash, revision, total keys, total size (snapshot_file.h says what
// each is for an Epoch archive).
Status RunStatus(Ctl& ctl, const std::string& path) {
  Result<SnapshotInfo> info = ReadSnapshotStatus(path);
  if (!info.ok()) return info.status();
  const std::uint64_t keys = info->total_keys.value_or(0);
  switch (ctl.format()) {
    case OutputFormat::kJson:
      ctl.out() << GoJsonObject()
                       .Int("hash", info->Hash32())
                       .Int("revision", info->revision)
                       .Int("totalKey", static_cast<std::int64_t>(keys))
                       .Int("totalSize", static_cast<std::int64_t>(info->total_bytes))
                       .Close()
                << "\n";
      break;
    case OutputFormat::kTable:
      PrintTable(ctl.out(), {"HASH", "REVISION", "TOTAL KEYS", "TOTAL SIZE"},
                 {{fmt::format("{:x}", info->Hash32()), std::to_string(info->revision),
                   std::to_string(keys), HumanBytes(info->total_bytes)}});
      break;
    case OutputFormat::kFields:
      ctl.out() << fmt::format("\"Hash\" : {}\n\"Revision\" : {}\n\"Keys\" : {}\n\"Size\" : {}\n",
                               info->Hash32(), info->revision, keys, info->total_bytes);
      break;
    case OutputFormat::kProtobuf: return FormatUnsupported(ctl, "protobuf");
    case OutputFormat::kSimple:
      ctl.out() << fmt::format("{:x}, {}, {}, {}\n", info->Hash32(), info->revision, keys,
                               HumanBytes(info->total_bytes));
      break;
  }
  return Status::Ok();
}

struct RestoreFlags {
  std::string file;
  std::string name;
  std::string data_dir;
  std::string initial_cluster;
  std::string initial_cluster_clients;
  std::string initial_cluster_token;
  std::string listen_client;
  std::string listen_peer;
  std::string epochd;
};

// epochd next to this binary, in the build tree's server/ folder, or on PATH.
std::string FindEpochd() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (const auto& candidate :
         {self.parent_path() / "epochd", self.parent_path().parent_path() / "server" / "epochd"}) {
      if (std::filesystem::exists(candidate, ec)) return candidate.string();
    }
  }
  return "epochd";
}

Status RunRestore(const RestoreFlags& f) {
  std::vector<std::string> argv = {f.epochd.empty() ? FindEpochd() : f.epochd,
                                   "--restore-snapshot",
                                   f.file,
                                   "--name",
                                   f.name,
                                   "--data-dir",
                                   f.data_dir,
                                   "--initial-cluster",
                                   f.initial_cluster};
  if (!f.initial_cluster_clients.empty()) {
    argv.insert(argv.end(), {"--initial-cluster-clients", f.initial_cluster_clients});
  }
  const std::pair<const char*, const std::string*> optional[] = {
      {"--initial-cluster-token", &f.initial_cluster_token},
      {"--listen-client-urls", &f.listen_client},
      {"--listen-peer-urls", &f.listen_peer}};
  for (const auto& [flag, value] : optional) {
    if (!value->empty()) argv.insert(argv.end(), {flag, *value});
  }
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Status::IOError("fork failed");
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execvp(args[0], args.data());
    fmt::print(stderr, "Error: cannot run {}: {}\n", argv[0], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Status::IOError("waitpid failed");
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return Status::Ok();
  return Status::FailedPrecondition(
      fmt::format("{} --restore-snapshot failed (status {}); see its message above", argv[0],
                  WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status)));
}

}  // namespace

void RegisterSnapshotCommands(CLI::App& app, Ctl& ctl) {
  CLI::App* snapshot = app.add_subcommand("snapshot", "Manages snapshots");
  snapshot->require_subcommand(1);

  auto save_path = std::make_shared<std::string>();
  CLI::App* save = snapshot->add_subcommand("save", "Stores a snapshot of one member to a file");
  save->add_option("filename", *save_path, "Destination file")->required();
  save->callback(Runner(ctl, [&ctl, save_path] { return RunSave(ctl, *save_path); }));

  auto status_path = std::make_shared<std::string>();
  CLI::App* status = snapshot->add_subcommand(
      "status",
      "Gets backend snapshot status of a given file (hash, revision, total keys, total size)");
  status->add_option("filename", *status_path, "Snapshot file")->required();
  status->callback(Runner(ctl, [&ctl, status_path] { return RunStatus(ctl, *status_path); }));

  auto f = std::make_shared<RestoreFlags>();
  CLI::App* restore = snapshot->add_subcommand(
      "restore",
      "Seeds one member of a NEW cluster from a snapshot (runs epochd --restore-snapshot)");
  restore->add_option("filename", f->file, "Snapshot file")->required();
  restore->add_option("--name", f->name, "This member's name")->required();
  restore->add_option("--data-dir", f->data_dir, "Empty data directory of the member")->required();
  restore->add_option("--initial-cluster", f->initial_cluster, "name=peer,... of the new cluster")
      ->required();
  restore->add_option("--initial-cluster-clients", f->initial_cluster_clients,
                      "name=client,... of the new cluster");
  restore->add_option("--initial-cluster-token", f->initial_cluster_token,
                      "Cluster token of the new cluster");
  restore->add_option("--listen-client-urls", f->listen_client, "This member's client address");
  restore->add_option("--listen-peer-urls", f->listen_peer, "This member's peer address");
  restore->add_option("--epochd", f->epochd, "Path of the epochd binary");
  restore->callback(Runner(ctl, [f] { return RunRestore(*f); }));
}

}  // namespace epoch::ctl
