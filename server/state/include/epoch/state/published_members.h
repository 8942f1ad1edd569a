// Members' published attributes (etcd's member "publish"): each member proposes its own client
// URLs when it starts (MemberPublisher, member_publisher.h), the state machine keeps the latest
// per member (KvStore::Members), and MemberList and the lease forwarder read them — so members
// need only etcd's flags, not every other member's client address (--initial-cluster-clients).
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "epoch/state/kv_store.h"
#include "epoch/status.h"
#include "epoch/v1/internal.pb.h"

namespace epoch::server {

inline constexpr std::size_t kMaxClientUrls = 16;
inline constexpr std::size_t kMaxClientUrlBytes = 256;

// A publication that may be applied: a member ID, a name, 1..16 URLs of at most 256 bytes.
Status ValidateMemberAttributes(const v1::MemberAttributes& attributes);

// `members` with `attributes` in place of that member's previous entry (sorted by ID).
std::shared_ptr<const PublishedMembers> WithMember(const PublishedMembers& members,
                                                   const v1::MemberAttributes& attributes);

// The published entry of member `id`, if any.
const PublishedMember* FindPublished(const PublishedMembers& members, std::uint64_t id);

// "host:port" to dial for a client URL ("http://host:port" or "host:port").
std::string DialTarget(std::string_view url);

}  // namespace epoch::server
