#include "job_release.h"

#include "epoch/rpc/grpc_util.h"

namespace epoch::server {
namespace {

namespace pb = etcdserverpb;

}  // namespace

void JobRelease::Start(NodeContext& node, JobsMetrics& metrics, rpc::UnaryReactor* reactor,
                       std::chrono::system_clock::time_point deadline,
                       v1::JobReleaseResponse* response, Params params) {
  std::shared_ptr<JobRelease> r(
      new JobRelease(node, metrics, reactor, deadline, response, std::move(params)));
  r->ReadOwner();
}

void JobRelease::ReadOwner() {
  node_.ReadBarrier(false, [self = shared_from_this()](const Status& s) {
    if (!s.ok()) return self->reactor_->Finish(ToGrpc(s));
    const jobs::QueueKeys& keys = self->params_.keys;
    Result<pb::RangeResponse> owner =
        self->node_.store().Range(recipe::FirstCreate(keys.LockPrefix()));
    if (!owner.ok()) return self->reactor_->Finish(ToGrpc(owner.status()));
    if (owner->kvs_size() == 0 || owner->kvs(0).create_revision() != self->params_.token) {
      return self->Answer(owner->header(), false, false);
    }
    pb::RangeRequest epoch;
    epoch.set_key(keys.Epoch());
    Result<pb::RangeResponse> record = self->node_.store().Range(epoch);
    if (!record.ok()) return self->reactor_->Finish(ToGrpc(record.status()));
    jobs::EpochRecord done{0, self->params_.token};
    if (record->kvs_size() > 0) {
      Result<jobs::EpochRecord> parsed = jobs::ParseEpochRecord(record->kvs(0).value());
      if (!parsed.ok()) {
        return self->reactor_->Finish(ToGrpc(parsed.status().Annotate(keys.Epoch())));
      }
      done.epoch = parsed->epoch;
    }
    self->Write(owner->kvs(0).key(), self->params_.completed, jobs::EncodeEpochRecord(done));
  });
}

void JobRelease::Write(const std::string& owner_key, bool completed,
                       const std::string& done_value) {
  recipe::Txn(
      node_, jobs::ReleaseTxn(params_.keys, owner_key, params_.token, completed, done_value),
      deadline_,
      [self = shared_from_this(), owner_key, completed](const grpc::Status& s,
                                                        const pb::TxnResponse& txn) {
        if (!s.ok()) return self->reactor_->Finish(s);
        if (txn.succeeded()) return self->Answer(txn.header(), true, completed);
        const auto& owner = txn.responses(0).response_range();
        const bool still_mine =
            owner.kvs_size() > 0 && owner.kvs(0).create_revision() == self->params_.token;
        // Still the holder, so the completing compare failed on the job key: it left the queue
        // some other way. Release the lock all the same.
        if (still_mine && completed) return self->Write(owner_key, false, {});
        self->Answer(txn.header(), false, false);
      },
      params_.stamp);
}

void JobRelease::Answer(const pb::ResponseHeader& header, bool released, bool completed) {
  if (released) metrics_.released[completed ? 1 : 0].fetch_add(1, std::memory_order_relaxed);
  *response_->mutable_header() = header;
  node_.FillHeader(response_->mutable_header());
  response_->set_released(released);
  reactor_->Finish(grpc::Status::OK);
}

}  // namespace epoch::server
