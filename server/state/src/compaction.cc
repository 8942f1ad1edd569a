#include "compaction.h"

#include <rocksdb/write_batch.h>
#include <spdlog/spdlog.h>

#include "epoch/thread_name.h"
#include "key_encoding.h"
#include "revision_codec.h"

namespace epoch::server {

Compactor::Compactor(rocksdb::DB* db, StoreFamilies families, KeyIndex* index,
                     CompactorOptions options, CompactionMetrics* metrics)
    : db_(db), families_(families), index_(index), options_(options), metrics_(metrics) {}

Compactor::~Compactor() { Stop(); }

void Compactor::Reset(Revision finished, Revision target) {
  std::vector<Done> ready;
  {
    std::lock_guard lock(mu_);
    finished_ = finished;
    target_ = std::max(target, finished);
    pass_target_ = Revision(-1);
    cursor_.clear();
    ready = TakeReadyLocked();
  }
  for (Done& d : ready) d(Status::Ok());
  wake_.notify_all();
}

void Compactor::Start() {
  std::lock_guard lock(mu_);
  if (!options_.background || thread_.joinable() || stop_) return;
  thread_ = std::thread([this] {
    SetThreadName("epoch-compact");
    Loop();
  });
}

void Compactor::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  FailWaiters(Status::Unavailable("epoch: the store is closing; compaction did not finish"));
}

void Compactor::Schedule(Revision target) {
  {
    std::lock_guard lock(mu_);
    if (target <= target_) return;
    target_ = target;
  }
  wake_.notify_all();
}

void Compactor::WhenFinished(Revision rev, Done done) {
  Status now;
  {
    std::lock_guard lock(mu_);
    if (finished_ < rev && !stop_) {
      waiters_.emplace_back(rev, std::move(done));
      return;
    }
    if (finished_ < rev) {
      now = Status::Unavailable("epoch: the store is closing; compaction did not finish");
    }
  }
  done(now);
}

Revision Compactor::finished() const {
  std::lock_guard lock(mu_);
  return finished_;
}

std::vector<Compactor::Done> Compactor::TakeReadyLocked() {
  std::vector<Done> ready;
  for (auto it = waiters_.begin(); it != waiters_.end();) {
    if (it->first <= finished_) {
      ready.push_back(std::move(it->second));
      it = waiters_.erase(it);
    } else {
      ++it;
    }
  }
  return ready;
}

void Compactor::FailWaiters(const Status& s) {
  std::vector<std::pair<Revision, Done>> waiters;
  {
    std::lock_guard lock(mu_);
    waiters.swap(waiters_);
  }
  for (auto& [rev, done] : waiters) done(s);
}

Result<bool> Compactor::RunBatch() {
  std::lock_guard run(run_mu_);
  const auto start = std::chrono::steady_clock::now();
  Revision target;
  std::string from;
  {
    std::lock_guard lock(mu_);
    if (finished_ >= target_) return false;
    target = target_;
    // A later target restarts the pass from the first key: every key may have more to drop.
    if (pass_target_ != target) {
      pass_target_ = target;
      cursor_.clear();
      pass_start_ = start;
    }
    from = cursor_;
  }
  std::vector<RevisionPair> removed;
  const std::optional<std::string> next =
      index_->CompactSome(from, target, options_.batch_entries, &removed);
  CompactionMetrics::ObserveMs(metrics_->index_pause, std::chrono::steady_clock::now() - start);
  // Index first, records second: the index no longer names these records to anyone, and a
  // reader that found them before holds a RocksDB snapshot that keeps them.
  rocksdb::WriteBatch batch;
  for (const RevisionPair& rev : removed) {
    EPOCH_RETURN_IF_ERROR(FromRocks(batch.Delete(families_.history, RevisionKey(rev)), "compact"));
  }
  if (!next.has_value()) {
    EPOCH_RETURN_IF_ERROR(FromRocks(
        batch.Put(families_.main, MetaKey(kMetaCompactFinished), EncodeInt64(target.value())),
        "compact"));
  }
  rocksdb::WriteOptions wo;
  wo.disableWAL = true;  // as every store write: durable at the next flush, in order
  EPOCH_RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "compact"));
  const auto end = std::chrono::steady_clock::now();
  CompactionMetrics::ObserveMs(metrics_->batch_pause, end - start);
  metrics_->records_deleted.fetch_add(removed.size(), std::memory_order_relaxed);

  std::vector<Done> ready;
  bool more = false;
  {
    std::lock_guard lock(mu_);
    if (next.has_value()) {
      cursor_ = *next;
    } else {
      finished_ = std::max(finished_, target);
      pass_target_ = Revision(-1);
      cursor_.clear();
      CompactionMetrics::ObserveMs(metrics_->pass_total, end - pass_start_);
      ready = TakeReadyLocked();
    }
    more = finished_ < target_;
  }
  for (Done& d : ready) d(Status::Ok());
  return more;
}

void Compactor::Loop() {
  while (true) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [this] { return stop_ || finished_ < target_; });
      if (stop_) return;
    }
    Result<bool> more = RunBatch();
    if (!more.ok()) {
      // Reads stay correct (leftovers are invisible); the records stay until a restart resumes.
      spdlog::error("history compaction stopped: {}", more.status().ToString());
      FailWaiters(more.status());
      return;
    }
    if (*more) {
      std::unique_lock lock(mu_);
      wake_.wait_for(lock, options_.batch_interval, [this] { return stop_; });
    }
  }
}

}  // namespace epoch::server
