#include "epoch/node/node_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <set>

namespace epoch::server {
namespace {

std::vector<std::string_view> Split(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  while (!text.empty()) {
    std::size_t pos = text.find(sep);
    parts.push_back(text.substr(0, pos));
    if (pos == std::string_view::npos) break;
    text.remove_prefix(pos + 1);
  }
  return parts;
}

Result<std::map<std::string, HostPort>> ParseNamedList(std::string_view text, const char* flag) {
  std::map<std::string, HostPort> out;
  for (std::string_view item : Split(text, ',')) {
    std::size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return Status::InvalidArgument(
          fmt::format("{}: '{}' is not of the form name=host:port", flag, item));
    }
    Result<HostPort> hp = ParseHostPort(item.substr(eq + 1));
    if (!hp.ok()) return hp.status().Annotate(flag);
    if (!out.emplace(std::string(item.substr(0, eq)), *hp).second) {
      return Status::InvalidArgument(
          fmt::format("{}: member '{}' is listed twice", flag, item.substr(0, eq)));
    }
  }
  if (out.empty()) return Status::InvalidArgument(fmt::format("{}: no members given", flag));
  return out;
}

}  // namespace

bool ClientTlsConfig::Any() const {
  return metrics_https || std::find(https.begin(), https.end(), true) != https.end();
}

std::string HostPort::ToString() const { return fmt::format("{}:{}", host, port); }

Result<HostPort> ParseHostPort(std::string_view text) {
  std::string_view rest = text;
  for (std::string_view scheme : {"http://", "https://"}) {
    if (rest.substr(0, scheme.size()) == scheme) rest.remove_prefix(scheme.size());
  }
  std::size_t colon = rest.rfind(':');
  if (colon == std::string_view::npos || colon == 0) {
    return Status::InvalidArgument(fmt::format("'{}' is not host:port", text));
  }
  std::string_view port_text = rest.substr(colon + 1);
  unsigned port = 0;
  auto [ptr, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
  if (ec != std::errc() || ptr != port_text.data() + port_text.size() || port > 65535) {
    return Status::InvalidArgument(fmt::format("'{}' has a bad port '{}'", text, port_text));
  }
  return HostPort{std::string(rest.substr(0, colon)), static_cast<std::uint16_t>(port)};
}

Result<std::vector<HostPort>> ParseHostPortList(std::string_view text) {
  std::vector<HostPort> out;
  for (std::string_view item : Split(text, ',')) {
    Result<HostPort> hp = ParseHostPort(item);
    if (!hp.ok()) return hp.status();
    out.push_back(*hp);
  }
  if (out.empty()) return Status::InvalidArgument("no address given");
  return out;
}

NodeId MemberIdFor(std::string_view cluster_token, std::string_view name) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
  };
  mix(cluster_token);
  mix("/");
  mix(name);
  return NodeId(h == 0 ? 1 : h);
}

std::uint64_t NodeConfig::cluster_id() const {
  if (joined_cluster_id != 0) return joined_cluster_id;
  // Every member's peer address is mixed in, as etcd mixes peer URLs into its IDs: two clusters
  // with the same names and token on one machine listen on different ports, so their IDs differ
  // and each refuses the other's peers. Members are listed in name order (ParseInitialCluster),
  // so every member computes the same ID.
  std::uint64_t h = MemberIdFor(cluster_token, "").value();
  for (const MemberInfo& m : members) {
    h = (h ^ m.id.value()) * 1099511628211ULL;
    h = (h ^ MemberIdFor(m.peer.ToString(), m.name).value()) * 1099511628211ULL;
  }
  return h == 0 ? 1 : h;
}

const MemberInfo* NodeConfig::FindMember(NodeId id) const {
  for (const MemberInfo& m : members) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

const HostPort& NodeConfig::PeerDialAddress(const MemberInfo& m) const {
  auto it = peer_dial_override.find(m.id);
  return it == peer_dial_override.end() ? m.peer : it->second;
}

Status ParsePeerDialOverride(std::string_view text, NodeConfig* config) {
  config->peer_dial_override.clear();
  if (text.empty()) return Status::Ok();
  auto parsed = ParseNamedList(text, "--peer-dial-override");
  if (!parsed.ok()) return parsed.status();
  for (const auto& [name, address] : *parsed) {
    NodeId id = MemberIdFor(config->cluster_token, name);
    if (config->FindMember(id) == nullptr || name == config->name) {
      return Status::InvalidArgument(fmt::format(
          "--peer-dial-override: '{}' is not another member of --initial-cluster", name));
    }
    config->peer_dial_override[id] = address;
  }
  return Status::Ok();
}

Status ParseInitialCluster(std::string_view peers, std::string_view clients, NodeConfig* config) {
  auto peer_map = ParseNamedList(peers, "--initial-cluster");
  if (!peer_map.ok()) return peer_map.status();
  Result<std::map<std::string, HostPort>> client_map = std::map<std::string, HostPort>();
  if (!clients.empty()) client_map = ParseNamedList(clients, "--initial-cluster-clients");
  if (!client_map.ok()) return client_map.status();
  config->members.clear();
  for (const auto& [name, peer] : *peer_map) {
    if (clients.empty()) {  // learned from the members' publications
      config->members.push_back({MemberIdFor(config->cluster_token, name), name, peer, {}});
      continue;
    }
    auto it = client_map->find(name);
    if (it == client_map->end()) {
      return Status::InvalidArgument(fmt::format(
          "member '{}' is in --initial-cluster but not in --initial-cluster-clients", name));
    }
    config->members.push_back({MemberIdFor(config->cluster_token, name), name, peer, it->second});
  }
  for (const auto& [name, client] : *client_map) {
    if (!peer_map->count(name)) {
      return Status::InvalidArgument(fmt::format(
          "member '{}' is in --initial-cluster-clients but not in --initial-cluster", name));
    }
  }
  return Status::Ok();
}

std::int64_t NodeConfig::SpaceQuotaBytes() const {
  constexpr std::int64_t kDefaultQuotaBytes = std::int64_t{2} << 30;  // etcd's default
  if (quota_backend_bytes < 0) return 0;
  return quota_backend_bytes == 0 ? kDefaultQuotaBytes : quota_backend_bytes;
}

Status NodeConfig::Validate() const {
  if (name.empty()) return Status::InvalidArgument("--name is required");
  if (data_dir.empty()) return Status::InvalidArgument("--data-dir is required");
  if (members.empty()) return Status::InvalidArgument("--initial-cluster is required");
  if (members.size() > 7) {
    return Status::InvalidArgument(
        fmt::format("--initial-cluster lists {} members; at most 7 are supported", members.size()));
  }
  bool self_found = false;
  std::set<std::string> addresses;
  for (const MemberInfo& m : members) {
    self_found = self_found || m.name == name;
    for (const HostPort* hp : {&m.peer, &m.client}) {
      if (hp->port == 0) continue;  // a client address not known yet
      if (!addresses.insert(hp->ToString()).second) {
        return Status::InvalidArgument(
            fmt::format("address {} is used twice in the cluster", hp->ToString()));
      }
    }
  }
  if (!self_found) {
    return Status::InvalidArgument(
        fmt::format("--name '{}' is not a member of --initial-cluster", name));
  }
  if (tick.count() < 1 || tick.count() > 1000) {
    return Status::InvalidArgument(
        fmt::format("--tick-ms must be in [1, 1000], got {}", tick.count()));
  }
  Status raft_status = raft.Validate();
  if (!raft_status.ok()) return raft_status.Annotate("raft timing");
  return Status::Ok();
}

}  // namespace epoch::server
