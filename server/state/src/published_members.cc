#include "epoch/state/published_members.h"

#include <fmt/format.h>

#include <algorithm>

namespace epoch::server {

Status ValidateMemberAttributes(const v1::MemberAttributes& a) {
  if (a.id() == 0) return Status::InvalidArgument("epoch: published attributes need a member ID");
  if (a.name().empty()) return Status::InvalidArgument("epoch: published attributes need a name");
  if (a.client_urls().empty() || a.client_urls_size() > static_cast<int>(kMaxClientUrls)) {
    return Status::InvalidArgument(
        fmt::format("epoch: a member publishes 1 to {} client URLs", kMaxClientUrls));
  }
  for (const std::string& url : a.client_urls()) {
    if (url.empty() || url.size() > kMaxClientUrlBytes) {
      return Status::InvalidArgument(
          fmt::format("epoch: a client URL has 1 to {} bytes", kMaxClientUrlBytes));
    }
  }
  return Status::Ok();
}

std::shared_ptr<const PublishedMembers> WithMember(const PublishedMembers& members,
                                                   const v1::MemberAttributes& a) {
  auto out = std::make_shared<PublishedMembers>(members);
  PublishedMember m{a.id(), a.name(), {a.client_urls().begin(), a.client_urls().end()}};
  auto at = std::lower_bound(out->begin(), out->end(), m.id,
                             [](const PublishedMember& p, std::uint64_t id) { return p.id < id; });
  if (at != out->end() && at->id == m.id) {
    *at = std::move(m);
  } else {
    out->insert(at, std::move(m));
  }
  return out;
}

const PublishedMember* FindPublished(const PublishedMembers& members, std::uint64_t id) {
  for (const PublishedMember& m : members) {
    if (m.id == id) return &m;
  }
  return nullptr;
}

std::string DialTarget(std::string_view url) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (url.starts_with(scheme)) url.remove_prefix(scheme.size());
  }
  if (!url.empty() && url.back() == '/') url.remove_suffix(1);
  return std::string(url);
}

}  // namespace epoch::server
