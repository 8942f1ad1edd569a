// The server-side Election service (v3electionpb.Election) against a real 3-node cluster:
// Campaign / Leader / Proclaim / Resign with etcd's errors and the fencing token, a second
// candidate waiting until the leader resigns, and Observe (through a follower) following every
// leader change: resign, proclaim, lease revoke, and a new leader after an empty election.
#include <fmt/format.h>

#include <atomic>
#include <thread>

#include "epoch/etcd_errors.h"
#include "recipe_support.h"
#include "support.h"

namespace epoch::integration {
namespace {

namespace epb = v3electionpb;

struct CampaignOutcome {
  grpc::Status status;
  epb::LeaderKey leader;
  std::int64_t token = -1;
};

CampaignOutcome Campaign(const std::shared_ptr<grpc::Channel>& channel, const std::string& name,
                         std::int64_t lease, const std::string& value) {
  auto stub = epb::Election::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(20)));
  epb::CampaignRequest request;
  request.set_name(name);
  request.set_lease(lease);
  request.set_value(value);
  epb::CampaignResponse response;
  CampaignOutcome out;
  out.status = stub->Campaign(&ctx, request, &response);
  out.leader = response.leader();
  if (out.status.ok()) out.token = TokenFrom(ctx);
  return out;
}

grpc::Status Proclaim(const std::shared_ptr<grpc::Channel>& channel, const epb::LeaderKey* leader,
                      const std::string& value) {
  auto stub = epb::Election::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(5)));
  epb::ProclaimRequest request;
  if (leader) *request.mutable_leader() = *leader;
  request.set_value(value);
  epb::ProclaimResponse response;
  return stub->Proclaim(&ctx, request, &response);
}

grpc::Status Resign(const std::shared_ptr<grpc::Channel>& channel, const epb::LeaderKey* leader) {
  auto stub = epb::Election::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(5)));
  epb::ResignRequest request;
  if (leader) *request.mutable_leader() = *leader;
  epb::ResignResponse response;
  return stub->Resign(&ctx, request, &response);
}

grpc::Status Leader(const std::shared_ptr<grpc::Channel>& channel, const std::string& name,
                    epb::LeaderResponse* response) {
  auto stub = epb::Election::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(std::chrono::seconds(5)));
  epb::LeaderRequest request;
  request.set_name(name);
  return stub->Leader(&ctx, request, response);
}

// An Observe stream read by its own thread into a queue; cancelled and joined on destruction.
class Observer {
 public:
  Observer(const std::shared_ptr<grpc::Channel>& channel, const std::string& name)
      : stub_(epb::Election::NewStub(channel)) {
    ctx_.set_deadline(In(std::chrono::seconds(60)));
    epb::LeaderRequest request;
    request.set_name(name);
    reader_ = stub_->Observe(&ctx_, request);
    thread_ = std::thread([this] {
      epb::LeaderResponse response;
      while (reader_->Read(&response)) queue_.Push(response);
    });
  }
  ~Observer() {
    ctx_.TryCancel();
    thread_.join();
    (void)reader_->Finish();
  }
  // The next value the stream reported, or "<none>" after 10 s.
  std::string Next() {
    auto r = queue_.Pop(std::chrono::seconds(10));
    return r ? r->kv().value() : "<none>";
  }

 private:
  std::unique_ptr<epb::Election::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReader<epb::LeaderResponse>> reader_;
  BlockingQueue<epb::LeaderResponse> queue_;
  std::thread thread_;
};

TEST_CASE("Election service: campaign, leader, proclaim, resign and etcd's errors",
          "[integration][election]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % cluster->size();
  auto via = cluster->Channel(follower);
  const std::int64_t lease = GrantLease(via, 30);
  REQUIRE(lease != 0);

  epb::LeaderResponse current;
  grpc::Status none = Leader(via, "el/a", &current);
  CHECK(none.error_code() == grpc::StatusCode::UNKNOWN);
  CHECK(none.error_message() == "election: no leader");

  CampaignOutcome won = Campaign(via, "el/a", lease, "v1");
  INFO("campaign: " << won.status.error_message());
  REQUIRE(won.status.ok());
  CHECK(won.leader.name() == "el/a");
  CHECK(won.leader.key() == fmt::format("el/a/{:x}", static_cast<std::uint64_t>(lease)));
  CHECK(won.leader.lease() == lease);
  CHECK(won.token == won.leader.rev());
  REQUIRE(Leader(via, "el/a", &current).ok());
  CHECK(current.kv().value() == "v1");
  CHECK(current.kv().create_revision() == won.leader.rev());

  REQUIRE(Proclaim(via, &won.leader, "v2").ok());
  REQUIRE(Leader(via, "el/a", &current).ok());
  CHECK(current.kv().value() == "v2");

  epb::LeaderKey stale = won.leader;
  stale.set_rev(won.leader.rev() + 1000);
  grpc::Status not_leader = Proclaim(via, &stale, "v3");
  CHECK(not_leader.error_code() == grpc::StatusCode::UNKNOWN);
  CHECK(not_leader.error_message() == "election: not leader");
  grpc::Status missing = Proclaim(via, nullptr, "v3");
  CHECK(missing.error_message() == "\"leader\" field must be provided");
  CHECK(Resign(via, nullptr).error_message() == "\"leader\" field must be provided");

  // Campaigning again with the same lease keeps the leadership and proclaims the new value.
  CampaignOutcome again = Campaign(via, "el/a", lease, "v4");
  REQUIRE(again.status.ok());
  CHECK(again.leader.rev() == won.leader.rev());
  REQUIRE(Leader(via, "el/a", &current).ok());
  CHECK(current.kv().value() == "v4");

  REQUIRE(Resign(via, &won.leader).ok());
  CHECK(Leader(via, "el/a", &current).error_message() == "election: no leader");
  CampaignOutcome unknown = Campaign(via, "el/a", 0x5151, "x");
  CHECK(unknown.status.error_message() == epoch::etcd_errors::kLeaseNotFound.message);
}

TEST_CASE("Election service: observe follows resign, proclaim, lease revoke and a new campaign",
          "[integration][election]") {
  auto cluster = StartCluster();
  Result<int> leader = cluster->WaitHealthy(std::chrono::seconds(10));
  REQUIRE(leader.ok());
  const int follower = (*leader + 1) % cluster->size();
  auto lead = cluster->Channel(*leader);
  const std::int64_t l1 = GrantLease(lead, 30);
  const std::int64_t l2 = GrantLease(lead, 30);
  const std::int64_t l3 = GrantLease(lead, 30);
  REQUIRE(l1 != 0);
  REQUIRE(l2 != 0);
  REQUIRE(l3 != 0);

  CampaignOutcome first = Campaign(lead, "el/b", l1, "first");
  REQUIRE(first.status.ok());
  Observer observer(cluster->Channel(follower), "el/b");
  CHECK(observer.Next() == "first");

  // A second candidate waits while the first leads.
  std::atomic<bool> done{false};
  CampaignOutcome second;
  std::thread t([&] {
    second = Campaign(cluster->Channel(follower), "el/b", l2, "second");
    done = true;
  });
  const bool queued = Eventually(
      [&] {
        auto r = RangePrefix(lead, "el/b/");
        return r && r->kvs_size() == 2;
      },
      std::chrono::seconds(10), kProcessPoll);
  const bool waited = !done.load();
  INFO("second campaign: " << second.status.error_message());
  grpc::Status resigned = Resign(lead, &first.leader);
  t.join();
  REQUIRE(queued);
  CHECK(waited);
  REQUIRE(resigned.ok());
  REQUIRE(second.status.ok());
  CHECK(second.leader.rev() > first.leader.rev());
  CHECK(observer.Next() == "second");

  REQUIRE(Proclaim(lead, &second.leader, "second-v2").ok());
  CHECK(observer.Next() == "second-v2");

  // The leader's lease goes: no leader, then the next campaign's value.
  REQUIRE(RevokeLease(lead, l2).ok());
  REQUIRE(Campaign(lead, "el/b", l3, "third").status.ok());
  CHECK(observer.Next() == "third");
}

}  // namespace
}  // namespace epoch::integration
