#include "epoch/chaos/watch_workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <future>
#include <memory>
#include <stop_token>

#include "epoch/client/client.h"
#include "epoch/test_support/eventually.h"

namespace epoch::chaos {
namespace {

WatchEvent FromProto(const mvccpb::Event& e) {
  return WatchEvent{e.kv().mod_revision(), e.kv().key(), e.type() == mvccpb::Event::DELETE,
                    e.kv().value()};
}

std::string Describe(const WatchEvent& e) {
  return fmt::format("rev={} {} {}{}", e.revision, e.is_delete ? "DELETE" : "PUT", e.key,
                     e.is_delete ? "" : "=" + e.value);
}

Result<std::unique_ptr<client::Client>> MakeClient(std::vector<std::string> endpoints, int rotate) {
  if (!endpoints.empty()) {
    std::rotate(endpoints.begin(),
                endpoints.begin() + static_cast<long>(rotate % static_cast<int>(endpoints.size())),
                endpoints.end());
  }
  client::ClientOptions o;
  o.endpoints = std::move(endpoints);
  o.call_timeout = std::chrono::milliseconds(2000);
  o.dial_timeout = std::chrono::milliseconds(200);
  // Chaos clusters with client TLS serve self-signed --auto-tls certificates (https:// endpoints).
  o.tls.insecure_skip_verify = true;
  return client::Client::Create(o);
}

etcdserverpb::WatchCreateRequest CreateRequest(const std::string& prefix, std::int64_t from) {
  etcdserverpb::WatchCreateRequest create;
  create.set_key(prefix);
  create.set_range_end(client::PrefixRangeEnd(prefix));
  create.set_start_revision(from);
  return create;
}

}  // namespace

void WatchWorkload::Start() {
  for (int i = 0; i < options_.watchers; ++i) {
    watchers_.push_back(std::make_unique<Watcher>());
    threads_.emplace_back([this, i, w = watchers_.back().get()] { Run(i, w); });
  }
}

void WatchWorkload::Stop() {
  stop_.request_stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void WatchWorkload::Run(int index, Watcher* w) {
  auto c = MakeClient(options_.endpoints, index + 1);
  if (!c.ok()) {
    std::lock_guard lock(w->mu);
    w->error = c.status().ToString();
    return;
  }
  std::int64_t next = options_.start_revision;
  std::stop_token stop = stop_.get_token();
  for (int attempt = 0; !stop.stop_requested() && attempt < 100'000; ++attempt) {
    if (attempt > 0) {
      std::lock_guard lock(w->mu);
      ++w->reconnects;
    }
    auto stream = (*c)->OpenWatch(stop);
    if (!stream.ok() || !(*stream)->Create(CreateRequest(options_.prefix, next)).ok()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // reconnect pacing
      continue;
    }
    while (!stop.stop_requested()) {
      auto r = (*stream)->Receive();
      if (!r.ok()) break;
      if (r->canceled()) {
        std::lock_guard lock(w->mu);
        if (r->compact_revision() > 0) {
          w->error =
              fmt::format("watch from {} answered compacted at {}", next, r->compact_revision());
        }
        break;
      }
      std::lock_guard lock(w->mu);
      for (const mvccpb::Event& e : r->events()) {
        w->events.push_back(FromProto(e));
        next = e.kv().mod_revision() + 1;
      }
    }
    if (!stop.stop_requested()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool WatchWorkload::WaitForRevision(std::int64_t revision, std::chrono::milliseconds timeout) {
  auto every_watcher_there = [&] {
    for (auto& w : watchers_) {
      std::lock_guard lock(w->mu);
      if (w->events.empty() || w->events.back().revision < revision) return false;
    }
    return true;
  };
  return test_support::Eventually(every_watcher_there, timeout, test_support::kProcessPoll);
}

WatchReport WatchWorkload::Check(const std::vector<WatchEvent>& history) const {
  WatchReport report;
  for (std::size_t i = 0; i < watchers_.size(); ++i) {
    Watcher& w = *watchers_[i];
    std::lock_guard lock(w.mu);
    report.events += w.events.size();
    report.reconnects += w.reconnects;
    if (!report.violation.empty()) continue;
    if (!w.error.empty()) {
      report.violation = fmt::format("watcher {}: {}", i, w.error);
      continue;
    }
    std::string diff = CompareWatchEvents(w.events, history);
    if (!diff.empty()) report.violation = fmt::format("watcher {}: {}", i, diff);
  }
  return report;
}

std::string CompareWatchEvents(const std::vector<WatchEvent>& seen,
                               const std::vector<WatchEvent>& history) {
  std::size_t n = std::min(seen.size(), history.size());
  for (std::size_t k = 0; k < n; ++k) {
    if (!(seen[k] == history[k])) {
      return fmt::format("event #{}: saw {}, the history has {} (a gap, duplicate or reordering)",
                         k, Describe(seen[k]), Describe(history[k]));
    }
  }
  if (seen.size() != history.size()) {
    return fmt::format("saw {} events, the history has {}", seen.size(), history.size());
  }
  return {};
}

std::string WatchWorkload::Dump() const {
  std::string out;
  for (std::size_t i = 0; i < watchers_.size(); ++i) {
    std::lock_guard lock(watchers_[i]->mu);
    out += fmt::format("watcher {} ({} events, {} reconnects{})\n", i, watchers_[i]->events.size(),
                       watchers_[i]->reconnects,
                       watchers_[i]->error.empty() ? "" : ", error: " + watchers_[i]->error);
    for (const WatchEvent& e : watchers_[i]->events) out += "  " + Describe(e) + "\n";
  }
  return out;
}

Result<std::vector<WatchEvent>> ReadHistory(const std::vector<std::string>& endpoints,
                                            const std::string& prefix, std::int64_t from,
                                            std::int64_t to, std::chrono::milliseconds timeout) {
  auto c = MakeClient(endpoints, 0);
  if (!c.ok()) return c.status();
  std::stop_source stop;
  auto stream = (*c)->OpenWatch(stop.get_token());
  if (!stream.ok()) return stream.status();
  EPOCH_RETURN_IF_ERROR((*stream)->Create(CreateRequest(prefix, from)));
  // The reader blocks in Receive(); a timer thread cancels the stream at the deadline.
  std::promise<void> done;
  std::thread timer([&stop, f = done.get_future(), timeout]() mutable {
    if (f.wait_for(timeout) == std::future_status::timeout) stop.request_stop();
  });
  std::vector<WatchEvent> events;
  Status status = Status::Ok();
  while (events.empty() || events.back().revision < to) {
    auto r = (*stream)->Receive();
    if (!r.ok()) {
      status = r.status().Annotate(fmt::format("history watch [{}, {}]", from, to));
      break;
    }
    if (r->canceled()) {
      status = Status::Aborted(fmt::format("history watch canceled: {}", r->cancel_reason()));
      break;
    }
    for (const mvccpb::Event& e : r->events()) events.push_back(FromProto(e));
  }
  done.set_value();
  timer.join();
  if (!status.ok()) return status;
  return events;
}

}  // namespace epoch::chaos
