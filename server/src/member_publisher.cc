#include "member_publisher.h"

#include <spdlog/spdlog.h>

#include "published_members.h"

namespace epoch::server {

MemberPublisher::MemberPublisher(NodeContext& node, std::vector<std::string> client_urls,
                                 std::chrono::milliseconds retry)
    : node_(node),
      client_urls_(std::move(client_urls)),
      retry_(retry),
      timer_(node.read_pool().get_executor()) {}

MemberPublisher::~MemberPublisher() { Stop(); }

void MemberPublisher::Start() {
  std::lock_guard lock(mu_);
  if (!stopped_) ScheduleLocked();
}

void MemberPublisher::Stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  timer_.cancel();
}

bool MemberPublisher::Published() const {
  std::shared_ptr<const PublishedMembers> members = node_.store().Members();
  const PublishedMember* self = FindPublished(*members, node_.config().self_id().value());
  return self != nullptr && self->client_urls == client_urls_ && self->name == node_.config().name;
}

void MemberPublisher::ScheduleLocked() {
  timer_.expires_after(retry_);
  timer_.async_wait([this](std::error_code ec) {
    if (ec) return;
    if (Published()) return;  // done for this start
    Attempt();
    std::lock_guard lock(mu_);
    if (!stopped_) ScheduleLocked();
  });
}

void MemberPublisher::Attempt() {
  if (proposing_.exchange(true)) return;
  v1::InternalRequest request;
  v1::MemberAttributes* a = request.mutable_member_attributes();
  a->set_id(node_.config().self_id().value());
  a->set_name(node_.config().name);
  for (const std::string& url : client_urls_) a->add_client_urls(url);
  node_.Write(std::move(request), std::chrono::system_clock::now() + std::chrono::seconds(5),
              [this](const Status& s, const v1::InternalResponse&) {
                if (s.ok()) {
                  spdlog::info("node={} published its client URLs", node_.config().name);
                } else {
                  spdlog::debug("node={} publishing its client URLs: {}", node_.config().name,
                                s.ToString());
                }
                proposing_.store(false);
              });
}

}  // namespace epoch::server
