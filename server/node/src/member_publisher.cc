#include "epoch/node/member_publisher.h"

#include <spdlog/spdlog.h>

#include "epoch/state/published_members.h"

namespace epoch::server {

MemberPublisher::MemberPublisher(NodeContext& node, std::vector<std::string> client_urls,
                                 std::chrono::milliseconds retry)
    : node_(node),
      client_urls_(std::move(client_urls)),
      attempts_(node.read_pool().get_executor(), retry, [this] {
        if (Published()) return false;  // done for this start
        Attempt();
        return true;
      }) {}

MemberPublisher::~MemberPublisher() { Stop(); }

void MemberPublisher::Start() { attempts_.Start(); }

void MemberPublisher::Stop() { attempts_.Stop(); }

bool MemberPublisher::Published() const {
  std::shared_ptr<const PublishedMembers> members = node_.store().Members();
  const PublishedMember* self = FindPublished(*members, node_.config().self_id().value());
  return self != nullptr && self->client_urls == client_urls_ && self->name == node_.config().name;
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
                  spdlog::info("name={} published its client URLs", node_.config().name);
                } else {
                  spdlog::debug("name={} publishing its client URLs: {}", node_.config().name,
                                s.ToString());
                }
                proposing_.store(false);
              });
}

}  // namespace epoch::server
