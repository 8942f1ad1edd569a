#include "health_probes.h"

#include <fmt/format.h>

#include <atomic>
#include <memory>

namespace epoch::server {
namespace {

// Answers once: the first of the read's callback and the timer wins.
struct Once {
  std::atomic<bool> answered{false};
  std::function<void(std::string)> done;
  void Answer(std::string problem) {
    if (!answered.exchange(true)) done(std::move(problem));
  }
};

// Runs `start(finish)` and answers with what `finish` gets, or `timeout_problem` after the
// timeout.
void WithDeadline(asio::io_context& io, std::chrono::milliseconds timeout,
                  std::string timeout_problem, std::function<void(std::string)> done,
                  const std::function<void(std::function<void(std::string)>)>& start) {
  auto once = std::make_shared<Once>();
  once->done = std::move(done);
  auto timer = std::make_shared<asio::steady_timer>(io, timeout);
  timer->async_wait([once, timer, problem = std::move(timeout_problem)](std::error_code ec) {
    if (!ec) once->Answer(problem);
  });
  start([once, timer](std::string problem) {
    once->Answer(std::move(problem));
    // The timer is cancelled on its own executor (timers are not thread-safe).
    asio::post(timer->get_executor(), [timer] { timer->cancel(); });
  });
}

std::string JsonEscape(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    out += c;
  }
  return out;
}

}  // namespace

std::string HealthProbes::LocalProblem() const {
  for (const StoreAlarm& alarm : store_.Alarms()) {
    if (alarm.type == etcdserverpb::NOSPACE || alarm.type == etcdserverpb::CORRUPT) {
      return fmt::format("ALARM {}", etcdserverpb::AlarmType_Name(alarm.type));
    }
  }
  if (driver_.status().leader == raft::kNoNode) return "RAFT NO LEADER";
  if (auto age = wal_.OldestPendingAge(std::chrono::steady_clock::now());
      age && *age > stall_bound_) {
    return fmt::format("WAL STALLED {} ms",
                       std::chrono::duration_cast<std::chrono::milliseconds>(*age).count());
  }
  return {};
}

void HealthProbes::Check(std::function<void(std::string)> done) {
  if (std::string problem = LocalProblem(); !problem.empty()) return done(std::move(problem));
  WithDeadline(io_, kReadTimeout, "LINEARIZABLE READ TIMEOUT", std::move(done),
               [this](std::function<void(std::string)> finish) {
                 driver_.ReadIndex([finish = std::move(finish)](const Status& s) {
                   finish(s.ok() ? std::string() : "LINEARIZABLE READ FAILED: " + s.ToString());
                 });
               });
}

void HealthProbes::Health(MetricsHttp::Respond respond) {
  Check([respond = std::move(respond)](std::string problem) {
    HttpReply reply;
    reply.content_type = "application/json";
    if (problem.empty()) {
      reply.body = "{\"health\":\"true\"}";
    } else {
      reply.code = 503;
      reply.body = fmt::format("{{\"health\":\"false\",\"reason\":\"{}\"}}", JsonEscape(problem));
    }
    respond(std::move(reply));
  });
}

void HealthProbes::Ready(MetricsHttp::Respond respond) {
  Check([respond = std::move(respond)](std::string problem) {
    if (problem.empty()) return respond(HttpReply{200, "ok\n"});
    respond(HttpReply{503, fmt::format("not ready: {}\n", problem)});
  });
}

void HealthProbes::Live(MetricsHttp::Respond respond) {
  WithDeadline(
      io_, kReadTimeout, "RAFT LOOP UNRESPONSIVE",
      [respond = std::move(respond)](std::string problem) {
        if (problem.empty()) return respond(HttpReply{200, "ok\n"});
        respond(HttpReply{503, fmt::format("not live: {}\n", problem)});
      },
      [this](std::function<void(std::string)> finish) {
        driver_.Post([finish = std::move(finish)] { finish({}); });
      });
}

}  // namespace epoch::server
