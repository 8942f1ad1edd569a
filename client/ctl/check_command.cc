// check perf: etcdctl 3.4's performance check (etcdctl/ctlv3/command/check.go). For 60 s, puts of
// a 256-byte key (a random varint, zero padded, under --prefix) and a 1 KiB zero value at the
// load's rate, from the load's number of concurrent clients; a progress bar meanwhile; then the
// keys are deleted (optionally compacted and defragmented) and the verdict printed: throughput
// above 90 % of the rate, slowest request at most 0.5 s, standard deviation at most 0.1 s, no
// errors. `PASS` exits 0, `FAIL` 1, as etcdctl.
//
// Epoch's own: EPOCH_CHECK_PERF_SECONDS (a positive integer) replaces the 60 s, so tests can run
// the whole check in a few seconds.
//
// check datascale: etcdctl 3.4's memory check (same file of etcdctl): the first endpoint's
// process_resident_memory_bytes from its /metrics before and after writing the load's number of
// key-value pairs, then the keys deleted (compacted, defragmented) and `PASS: Approximate system
// memory used : X MB.` (exit 0) or etcdctl's FAIL lines (exit 1). Epoch's own:
// EPOCH_CHECK_DATASCALE_KEYS (a positive integer) replaces the load's number of pairs.
//
// Threading: the command's thread waits; a producer thread feeds the requests into a bounded
// queue (paced at the load's rate for perf, as fast as taken for datascale), the load's number of
// worker threads send them (over a few shared Clients), a bar thread prints the progress bar. All
// are joined before the verdict.
#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "commands.h"
#include "epoch/client/admin.h"
#include "fields_output.h"
#include "metrics_fetch.h"

namespace epoch::ctl {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kDefaultSeconds = 60;
constexpr std::size_t kKeyBytes = 256;
constexpr std::size_t kValueBytes = 1024;
// Workers share this many Clients at most (gRPC multiplexes the calls of one channel).
constexpr std::size_t kMaxClients = 16;

struct PerfLoad {
  int writes_per_second;
  int clients;
};

std::optional<PerfLoad> LoadNamed(const std::string& name) {
  if (name == "s" || name == "small") return PerfLoad{150, 50};
  if (name == "m" || name == "medium") return PerfLoad{1000, 200};
  if (name == "l" || name == "large") return PerfLoad{8000, 500};
  if (name == "xl" || name == "xLarge") return PerfLoad{15000, 1000};
  return std::nullopt;
}

struct CheckPerfFlags {
  std::string load = "s";
  std::string prefix = "/etcdctl-check-perf/";
  bool auto_compact = false;
  bool auto_defrag = false;
};

Result<int> DurationSeconds() {
  const char* env = std::getenv("EPOCH_CHECK_PERF_SECONDS");
  if (env == nullptr || *env == '\0') return kDefaultSeconds;
  char* end = nullptr;
  const long seconds = std::strtol(env, &end, 10);
  if (*end != '\0' || seconds <= 0 || seconds > 24 * 3600) {
    return Status::InvalidArgument(
        fmt::format("EPOCH_CHECK_PERF_SECONDS=\"{}\" is not a positive number of seconds", env));
  }
  return static_cast<int>(seconds);
}

// A bounded queue of keys to put: the producer blocks when the workers fall behind (the rate
// then drops, as etcdctl's channel of capacity `clients` makes it).
class KeyQueue {
 public:
  explicit KeyQueue(std::size_t capacity) : capacity_(capacity) {}

  void Push(std::string key) {
    std::unique_lock lock(mu_);
    not_full_.wait(lock, [this] { return keys_.size() < capacity_; });
    keys_.push_back(std::move(key));
    not_empty_.notify_one();
  }
  void Close() {
    std::lock_guard lock(mu_);
    closed_ = true;
    not_empty_.notify_all();
  }
  // The next key, or nullopt once closed and drained.
  std::optional<std::string> Pop() {
    std::unique_lock lock(mu_);
    not_empty_.wait(lock, [this] { return !keys_.empty() || closed_; });
    if (keys_.empty()) return std::nullopt;
    std::string key = std::move(keys_.front());
    keys_.pop_front();
    not_full_.notify_one();
    return key;
  }

 private:
  const std::size_t capacity_;
  std::mutex mu_;
  std::condition_variable not_full_;
  std::condition_variable not_empty_;
  std::deque<std::string> keys_;
  bool closed_ = false;
};

// What one worker saw: the latency of each successful put, and errors by text.
struct WorkerResults {
  std::vector<double> latencies_s;
  std::map<std::string, int> errors;
};

// etcd's pkg/report statistics over all workers' results.
struct PerfStats {
  double rps = 0;
  double slowest_s = 0;
  double stddev_s = 0;
  std::map<std::string, int> errors;
};

PerfStats Summarize(const std::vector<WorkerResults>& results, double total_s) {
  PerfStats stats;
  std::size_t count = 0;
  double sum = 0;
  for (const WorkerResults& r : results) {
    for (double l : r.latencies_s) {
      ++count;
      sum += l;
      stats.slowest_s = std::max(stats.slowest_s, l);
    }
    for (const auto& [text, n] : r.errors) stats.errors[text] += n;
  }
  stats.rps = total_s > 0 ? static_cast<double>(count) / total_s : 0;
  const double mean = sum / static_cast<double>(count);  // NaN without a success, as Go's
  double squares = 0;
  for (const WorkerResults& r : results) {
    for (double l : r.latencies_s) squares += (l - mean) * (l - mean);
  }
  stats.stddev_s = std::sqrt(squares / static_cast<double>(count));
  return stats;
}

// Go's %f: NaN and infinities spelled as Go spells them.
std::string GoFloat(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  return fmt::format("{:f}", value);
}

// time.Duration.String() of whole seconds.
std::string GoSeconds(std::int64_t seconds) {
  if (seconds < 60) return fmt::format("{}s", seconds);
  if (seconds < 3600) return fmt::format("{}m{}s", seconds / 60, seconds % 60);
  return fmt::format("{}h{}m{}s", seconds / 3600, seconds / 60 % 60, seconds % 60);
}

// The progress line etcdctl draws with gopkg.in/cheggaaa/pb.v1 (format "Bom !"), redrawn in place
// with "\r": the counters, on a terminal of `width` columns the bar between "B" and "!", the
// percentage, then `seconds`: the time left ("00m59s", none when not positive) or, once done, the
// time taken ("1m0s"). Off a terminal pb knows no width and draws no bar.
std::string BarLine(std::int64_t current, std::int64_t total, std::int64_t seconds, bool done,
                    int width) {
  const std::string counters = fmt::format(" {} / {} ", current, total);
  const std::string percent =
      fmt::format(" {:6.2f}%", 100.0 * current / static_cast<double>(total));
  std::string time;
  if (done) {
    time = " " + GoSeconds(seconds);
  } else if (current > 0 && current < total && seconds > 0) {
    const std::int64_t left = seconds;
    time = left < 3600 ? fmt::format(" {:02}m{:02}s", left / 60, left % 60)
                       : fmt::format(" {}h{:02}m{:02}s", left / 3600, left / 60 % 60, left % 60);
  }
  const int size = width - static_cast<int>(counters.size() + 2 + percent.size() + time.size());
  std::string bar;
  if (size > 0) {
    const int filled =
        std::min(size, static_cast<int>(std::ceil(size * static_cast<double>(current) / total)));
    bar = "B";
    if (filled >= size) {
      bar += std::string(static_cast<std::size_t>(size), 'o');
    } else if (filled > 0) {
      bar += std::string(static_cast<std::size_t>(filled - 1), 'o') + "m";
    }
    bar += std::string(static_cast<std::size_t>(size - std::max(filled, 0)), ' ') + "!";
  }
  return "\r" + counters + bar + percent + time;
}

// The terminal's width when stdout is one, else 0.
int TerminalWidth() {
  winsize size{};
  if (isatty(STDOUT_FILENO) == 0 || ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

// Sleeps until `until` or the stop request; returns false when stopped.
bool SleepUntil(Clock::time_point until, const std::stop_token& stop) {
  std::mutex mu;
  std::condition_variable_any cv;
  std::unique_lock lock(mu);
  (void)cv.wait_until(lock, stop, until, [] { return false; });
  return !stop.stop_requested();
}

// etcd's binary.PutVarint (zigzag) of a random non-negative int63 at the start of `key`.
void RandomKeyBytes(std::mt19937_64& rng, std::string* key) {
  std::uint64_t value = (rng() >> 1) << 1;  // zigzag of x >= 0 is 2x
  std::size_t i = 0;
  while (value >= 0x80) {
    (*key)[i++] = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  (*key)[i] = static_cast<char>(value);
}

class PerfRun {
 public:
  PerfRun(Ctl& ctl, const CheckPerfFlags& f, PerfLoad load, int seconds)
      : ctl_(ctl), f_(f), load_(load), seconds_(seconds), queue_(load.clients) {}

  // Runs the workload; returns its statistics (nullopt when interrupted).
  Result<std::optional<PerfStats>> Run(const std::vector<std::unique_ptr<client::Client>>& pool) {
    std::vector<WorkerResults> results(static_cast<std::size_t>(load_.clients));
    const std::string value(kValueBytes, '\0');
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline = start + std::chrono::seconds(seconds_);
    std::thread bar([this, start] { DrawBar(start); });
    std::thread producer([this, start, deadline] { Produce(start, deadline); });
    std::vector<std::thread> workers;
    for (int i = 0; i < load_.clients; ++i) {
      workers.emplace_back([&, i] {
        client::Client& c = *pool[static_cast<std::size_t>(i) % pool.size()];
        WorkerResults& mine = results[static_cast<std::size_t>(i)];
        while (std::optional<std::string> key = queue_.Pop()) {
          const Clock::time_point sent = Clock::now();
          Result<etcdserverpb::PutResponse> put =
              c.Put(*key, value, LeaseId(0), ctl_.CallWithoutTimeout());
          if (put.ok()) {
            mine.latencies_s.push_back(std::chrono::duration<double>(Clock::now() - sent).count());
          } else if (!ctl_.stop().stop_requested()) {
            ++mine.errors[ErrorLine(put.status())];
          }
        }
      });
    }
    producer.join();
    for (std::thread& w : workers) w.join();
    const double total_s = std::chrono::duration<double>(Clock::now() - start).count();
    bar.join();
    if (ctl_.stop().stop_requested()) return std::optional<PerfStats>();
    return std::optional<PerfStats>(Summarize(results, total_s));
  }

 private:
  // Paces the puts like golang.org/x/time/rate with burst 1: one every 1/rate seconds, no
  // catching up after a stall; stops at the deadline or on interrupt.
  void Produce(Clock::time_point start, Clock::time_point deadline) {
    std::mt19937_64 rng(std::random_device{}());
    const auto interval = std::chrono::duration_cast<Clock::duration>(
        std::chrono::duration<double>(1.0 / load_.writes_per_second));
    std::string key(kKeyBytes, '\0');
    Clock::time_point next = start;
    while (true) {
      next = std::max(next, Clock::now());
      if (next > deadline || !SleepUntil(next, ctl_.stop())) break;
      RandomKeyBytes(rng, &key);
      queue_.Push(f_.prefix + key);
      next += interval;
    }
    queue_.Close();
  }

  void DrawBar(Clock::time_point start) {
    std::ostream& out = ctl_.out();
    const int width = TerminalWidth();
    out << BarLine(0, seconds_, 0, false, width) << std::flush;
    for (int i = 1; i <= seconds_; ++i) {
      if (!SleepUntil(start + std::chrono::seconds(i), ctl_.stop())) break;
      out << BarLine(i, seconds_, i == seconds_ ? i : seconds_ - i, i == seconds_, width)
          << std::flush;
    }
    out << "\n" << std::flush;
  }

  Ctl& ctl_;
  const CheckPerfFlags& f_;
  const PerfLoad load_;
  const int seconds_;
  KeyQueue queue_;
};

// Calls after the workload: 30 s each, as etcdctl's, and not cut by an interrupt.
client::CallOptions CleanupCall() {
  client::CallOptions call;
  call.timeout = std::chrono::seconds(30);
  return call;
}

Status DeletePrefix(client::Client& c, const std::string& prefix, std::int64_t* revision) {
  etcdserverpb::DeleteRangeRequest del;
  del.set_key(prefix);
  del.set_range_end(client::PrefixRangeEnd(prefix));
  Result<etcdserverpb::DeleteRangeResponse> deleted = c.DeleteRange(del, CleanupCall());
  if (!deleted.ok()) return deleted.status();
  *revision = deleted->header().revision();
  return Status::Ok();
}

// etcdctl's compact and defrag helpers (etcdctl/ctlv3/command/util.go), with their lines.
Status CompactAndDefrag(Ctl& ctl, client::Client& c, bool auto_compact, bool auto_defrag,
                        std::int64_t revision) {
  if (auto_compact) {
    ctl.out() << fmt::format("Compacting with revision {}\n", revision) << std::flush;
    etcdserverpb::CompactionRequest compact;
    compact.set_revision(revision);
    compact.set_physical(true);
    Result<etcdserverpb::CompactionResponse> r = c.Compact(compact, CleanupCall());
    if (!r.ok()) return r.status();
    ctl.out() << fmt::format("Compacted with revision {}\n", revision);
  }
  if (auto_defrag) {
    const std::vector<std::string> endpoints = ctl.Endpoints();  // as given, like clientv3's
    for (std::size_t i = 0; i < endpoints.size(); ++i) {
      ctl.out() << fmt::format("Defragmenting {}\n", GoQuote(endpoints[i])) << std::flush;
      Result<etcdserverpb::DefragmentResponse> r = client::Defragment(c, i, CleanupCall());
      if (!r.ok()) return r.status();
      ctl.out() << fmt::format("Defragmented {}\n", GoQuote(endpoints[i]));
    }
  }
  return Status::Ok();
}

// The verdict lines; returns whether every check passed.
bool PrintVerdict(std::ostream& out, const PerfStats& s, const PerfLoad& load) {
  bool ok = true;
  if (!s.errors.empty()) {
    out << "FAIL: too many errors\n";
    for (const auto& [text, n] : s.errors) out << fmt::format("FAIL: ERROR({}) -> {}\n", text, n);
    ok = false;
  }
  const int throughput = static_cast<int>(s.rps) + 1;
  if (s.rps / load.writes_per_second <= 0.9) {
    out << fmt::format("FAIL: Throughput too low: {} writes/s\n", throughput);
    ok = false;
  } else {
    out << fmt::format("PASS: Throughput is {} writes/s\n", throughput);
  }
  if (s.slowest_s > 0.5) {
    out << fmt::format("Slowest request took too long: {}s\n", GoFloat(s.slowest_s));
    ok = false;
  } else {
    out << fmt::format("PASS: Slowest request took {}s\n", GoFloat(s.slowest_s));
  }
  if (s.stddev_s > 0.1) {
    out << fmt::format("Stddev too high: {}s\n", GoFloat(s.stddev_s));
    ok = false;
  } else {
    out << fmt::format("PASS: Stddev is {}s\n", GoFloat(s.stddev_s));
  }
  out << (ok ? "PASS\n" : "FAIL\n");
  return ok;
}

// The clients of a check (at most kMaxClients) under `prefix`, which must hold no keys (etcdctl
// refuses otherwise). Each Client connects (and learns whether the server keys writes) with a
// put of a `key_bytes` key under the prefix before the measurement starts, as etcdctl's clients
// are dialled before its workload starts; the check deletes the prefix at the end.
std::pair<Status, int> OpenCheckPool(Ctl& ctl, std::size_t clients, const std::string& prefix,
                                     std::size_t key_bytes,
                                     std::vector<std::unique_ptr<client::Client>>* pool) {
  for (std::size_t i = 0; i < std::min<std::size_t>(kMaxClients, clients); ++i) {
    Result<std::unique_ptr<client::Client>> c = ctl.ClientFor(ctl.Endpoints());
    if (!c.ok()) return {c.status(), 1};
    pool->push_back(std::move(*c));
  }
  client::Client& first = *pool->front();
  etcdserverpb::RangeRequest existing;
  existing.set_key(prefix);
  existing.set_range_end(client::PrefixRangeEnd(prefix));
  existing.set_limit(1);
  Result<etcdserverpb::RangeResponse> found = first.Range(existing, ctl.Call());
  if (!found.ok()) return {found.status(), 1};
  if (found->kvs_size() > 0) {
    return {Status::InvalidArgument(
                fmt::format("prefix {} has keys. Delete with etcdctl del --prefix {} first",
                            GoQuote(prefix), prefix)),
            kExitInvalidInput};
  }
  for (const std::unique_ptr<client::Client>& c : *pool) {
    Result<etcdserverpb::PutResponse> warm =
        c->Put(prefix + std::string(key_bytes, '\0'), "", LeaseId(0), ctl.Call());
    if (!warm.ok()) {
      std::int64_t ignored = 0;
      (void)DeletePrefix(first, prefix, &ignored);
      return {warm.status(), 1};
    }
  }
  return {Status::Ok(), 0};
}

// The whole check; the exit code goes with the status (etcdctl's for each failure).
std::pair<Status, int> RunCheckPerf(Ctl& ctl, const CheckPerfFlags& f) {
  const std::optional<PerfLoad> load = LoadNamed(f.load);
  if (!load) {
    return {Status::InvalidArgument(fmt::format("unknown load option {}", f.load)),
            kExitBadFeature};
  }
  Result<int> seconds = DurationSeconds();
  if (!seconds.ok()) return {seconds.status(), 1};
  std::vector<std::unique_ptr<client::Client>> pool;
  if (auto failed = OpenCheckPool(ctl, load->clients, f.prefix, kKeyBytes, &pool);
      !failed.first.ok()) {
    return failed;
  }
  client::Client& first = *pool.front();
  PerfRun run(ctl, f, *load, *seconds);
  Result<std::optional<PerfStats>> stats = run.Run(pool);
  std::int64_t revision = 0;
  const Status deleted = DeletePrefix(first, f.prefix, &revision);
  if (!stats.ok()) return {stats.status(), 1};
  if (!stats->has_value()) {
    return {Status::Aborted(deleted.ok() ? "check perf interrupted"
                                         : "check perf interrupted; deleting its keys failed: " +
                                               ErrorLine(deleted)),
            1};
  }
  if (!deleted.ok()) return {deleted, 1};
  const Status cleaned = CompactAndDefrag(ctl, first, f.auto_compact, f.auto_defrag, revision);
  if (!cleaned.ok()) return {cleaned, 1};
  if (!PrintVerdict(ctl.out(), **stats, *load)) {
    ctl.ExitWith(1);  // etcdctl's os.Exit(ExitError) after "FAIL": no error line
  }
  return {Status::Ok(), 0};
}

// check datascale: etcdctl 3.4's memory check. Measures the first endpoint's
// process_resident_memory_bytes (its /metrics), writes the load's number of key-value pairs (a
// 512-byte key: a random varint under --prefix, zero padded; a 512-byte zero value) from the
// load's number of concurrent clients as fast as they go, with a progress bar over the count,
// measures again, deletes the prefix (then compacts/defragments as check perf does) and prints the
// difference. Epoch's own: EPOCH_CHECK_DATASCALE_KEYS replaces the load's number of pairs.

struct DatascaleLoad {
  std::int64_t keys;
  int kv_bytes;
  int clients;
};

std::optional<DatascaleLoad> DatascaleLoadNamed(const std::string& name) {
  if (name == "s" || name == "small") return DatascaleLoad{10000, 1024, 50};
  if (name == "m" || name == "medium") return DatascaleLoad{100000, 1024, 200};
  if (name == "l" || name == "large") return DatascaleLoad{1000000, 1024, 500};
  if (name == "xl" || name == "xLarge") return DatascaleLoad{3000000, 1024, 1000};
  return std::nullopt;
}

struct CheckDatascaleFlags {
  std::string load = "s";
  std::string prefix = "/etcdctl-check-datascale/";
  bool auto_compact = false;
  bool auto_defrag = false;
};

constexpr std::size_t kDatascaleKeyBytes = 512;
constexpr std::size_t kDatascaleValueBytes = 512;
constexpr auto kMetricsTimeout = std::chrono::seconds(30);

// EPOCH_CHECK_DATASCALE_KEYS, else the load's number of pairs.
Result<std::int64_t> DatascaleKeys(const DatascaleLoad& load) {
  const char* env = std::getenv("EPOCH_CHECK_DATASCALE_KEYS");
  if (env == nullptr || *env == '\0') return load.keys;
  char* end = nullptr;
  const long long keys = std::strtoll(env, &end, 10);
  if (*end != '\0' || keys <= 0) {
    return Status::InvalidArgument(
        fmt::format("EPOCH_CHECK_DATASCALE_KEYS=\"{}\" is not a positive number of keys", env));
  }
  return static_cast<std::int64_t>(keys);
}

// Writes `keys` pairs from `clients` workers over `pool`; the errors by text, or nullopt when
// interrupted. Draws pb's bar over the count meanwhile (redrawn every 200 ms, as pb refreshes).
std::optional<std::map<std::string, int>> WriteDatascale(
    Ctl& ctl, const std::vector<std::unique_ptr<client::Client>>& pool, const std::string& prefix,
    std::int64_t keys, int clients) {
  KeyQueue queue(static_cast<std::size_t>(clients));
  std::atomic<std::int64_t> done{0};
  std::vector<WorkerResults> results(static_cast<std::size_t>(clients));
  const std::string value(kDatascaleValueBytes, '\0');
  const Clock::time_point start = Clock::now();
  std::stop_source bar_done;
  std::thread bar([&] {
    std::ostream& out = ctl.out();
    const int width = TerminalWidth();
    out << BarLine(0, keys, 0, false, width) << std::flush;
    const std::stop_token finished = bar_done.get_token();
    for (int tick = 1; SleepUntil(start + std::chrono::milliseconds(200) * tick, finished);
         ++tick) {
      const std::int64_t current = done.load();
      const double elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
      const auto left = current == 0
                            ? std::int64_t{0}
                            : static_cast<std::int64_t>(elapsed_s / current *
                                                        static_cast<double>(keys - current));
      out << BarLine(current, keys, left, false, width) << std::flush;
    }
    const auto taken = std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - start);
    out << BarLine(done.load(), keys, taken.count(), true, width) << "\n" << std::flush;
  });
  std::thread producer([&] {
    std::mt19937_64 rng(std::random_device{}());
    std::string key(kDatascaleKeyBytes, '\0');
    for (std::int64_t i = 0; i < keys && !ctl.stop().stop_requested(); ++i) {
      RandomKeyBytes(rng, &key);
      queue.Push(prefix + key);
    }
    queue.Close();
  });
  std::vector<std::thread> workers;
  for (int i = 0; i < clients; ++i) {
    workers.emplace_back([&, i] {
      client::Client& c = *pool[static_cast<std::size_t>(i) % pool.size()];
      WorkerResults& mine = results[static_cast<std::size_t>(i)];
      while (std::optional<std::string> key = queue.Pop()) {
        Result<etcdserverpb::PutResponse> put =
            c.Put(*key, value, LeaseId(0), ctl.CallWithoutTimeout());
        if (!put.ok() && !ctl.stop().stop_requested()) ++mine.errors[ErrorLine(put.status())];
        done.fetch_add(1);
      }
    });
  }
  producer.join();
  for (std::thread& w : workers) w.join();
  bar_done.request_stop();
  bar.join();
  if (ctl.stop().stop_requested()) return std::nullopt;
  std::map<std::string, int> errors;
  for (const WorkerResults& r : results) {
    for (const auto& [text, n] : r.errors) errors[text] += n;
  }
  return errors;
}

// The resident memory of `endpoint`, or 0 after printing why it could not be read (etcdctl
// prints the reason and then its FAIL line).
double ResidentMemory(Ctl& ctl, const std::string& endpoint) {
  Result<double> bytes = FetchResidentMemoryBytes(endpoint, kMetricsTimeout);
  if (!bytes.ok()) {
    ctl.out() << bytes.status().message() << "\n";
    return 0;
  }
  return *bytes;
}

std::pair<Status, int> RunCheckDatascale(Ctl& ctl, const CheckDatascaleFlags& f) {
  const std::optional<DatascaleLoad> load = DatascaleLoadNamed(f.load);
  if (!load) {
    return {Status::InvalidArgument(fmt::format("unknown load option {}", f.load)),
            kExitBadFeature};
  }
  Result<std::int64_t> keys = DatascaleKeys(*load);
  if (!keys.ok()) return {keys.status(), 1};
  std::vector<std::unique_ptr<client::Client>> pool;
  if (auto failed = OpenCheckPool(ctl, load->clients, f.prefix, kDatascaleKeyBytes, &pool);
      !failed.first.ok()) {
    return failed;
  }
  client::Client& first = *pool.front();
  const std::string endpoint = ctl.Endpoints().front();
  // etcdctl's FAIL lines exit 1 without an error line. Unlike etcdctl, the keys written are
  // deleted first (quietly: no compaction or defragmentation).
  const auto fail = [&](const std::string& line) -> std::pair<Status, int> {
    std::int64_t ignored = 0;
    (void)DeletePrefix(first, f.prefix, &ignored);
    ctl.out() << line << "\n";
    ctl.ExitWith(1);
    return {Status::Ok(), 0};
  };
  const double before = ResidentMemory(ctl, endpoint);
  if (before == 0) {
    return fail("FAIL: Could not read process_resident_memory_bytes before the put operations.");
  }
  ctl.out() << fmt::format(
                   "Start data scale check for work load [{} key-value pairs, {} bytes per "
                   "key-value, {} concurrent clients].\n",
                   *keys, load->kv_bytes, load->clients)
            << std::flush;
  const std::optional<std::map<std::string, int>> errors =
      WriteDatascale(ctl, pool, f.prefix, *keys, load->clients);
  if (!errors) {
    std::int64_t ignored = 0;
    const Status deleted = DeletePrefix(first, f.prefix, &ignored);
    return {Status::Aborted(deleted.ok() ? "check datascale interrupted"
                                         : "check datascale interrupted; deleting its keys "
                                           "failed: " +
                                               ErrorLine(deleted)),
            1};
  }
  const double after = ResidentMemory(ctl, endpoint);
  if (after == 0) {
    return fail("FAIL: Could not read process_resident_memory_bytes after the put operations.");
  }
  std::int64_t revision = 0;
  const Status deleted = DeletePrefix(first, f.prefix, &revision);
  if (!deleted.ok()) return {deleted, 1};
  const Status cleaned = CompactAndDefrag(ctl, first, f.auto_compact, f.auto_defrag, revision);
  if (!cleaned.ok()) return {cleaned, 1};
  if (!errors->empty()) {
    ctl.out() << "FAIL: too many errors\n";
    for (const auto& [text, n] : *errors) {
      ctl.out() << fmt::format("FAIL: ERROR({}) -> {}\n", text, n);
    }
    ctl.ExitWith(1);
    return {Status::Ok(), 0};
  }
  ctl.out() << fmt::format("PASS: Approximate system memory used : {:.2f} MB.\n",
                           (after - before) / (1024 * 1024));
  return {Status::Ok(), 0};
}

}  // namespace

void RegisterCheckCommands(CLI::App& app, Ctl& ctl) {
  CLI::App* check = app.add_subcommand("check", "Commands for checking properties of the cluster");
  check->require_subcommand(1);
  auto f = std::make_shared<CheckPerfFlags>();
  CLI::App* perf = check->add_subcommand(
      "perf",
      "Check the performance of the cluster (60 s; Epoch: EPOCH_CHECK_PERF_SECONDS=N for N s)");
  perf->add_option("--load", f->load,
                   "The performance check's workload model. Accepted workloads: s(small), "
                   "m(medium), l(large), xl(xLarge)")
      ->capture_default_str();
  perf->add_option("--prefix", f->prefix, "The prefix for writing the performance check's keys.")
      ->capture_default_str();
  perf->add_flag("--auto-compact", f->auto_compact,
                 "Compact storage with last revision after test is finished.");
  perf->add_flag("--auto-defrag", f->auto_defrag, "Defragment storage after test is finished.");
  perf->callback([&ctl, f] {
    Status status = ctl.Prepare();
    if (!status.ok()) return ctl.Finish(std::move(status));
    auto [outcome, exit_code] = RunCheckPerf(ctl, *f);
    ctl.Finish(std::move(outcome), exit_code);
  });

  auto d = std::make_shared<CheckDatascaleFlags>();
  CLI::App* datascale = check->add_subcommand(
      "datascale",
      "Check the memory usage of holding data for different workloads on a given server "
      "endpoint (the first of --endpoints; Epoch: EPOCH_CHECK_DATASCALE_KEYS=N writes N pairs)");
  datascale
      ->add_option("--load", d->load,
                   "The datascale check's workload model. Accepted workloads: s(small), "
                   "m(medium), l(large), xl(xLarge)")
      ->capture_default_str();
  datascale->add_option("--prefix", d->prefix, "The prefix for writing the datascale check's keys.")
      ->capture_default_str();
  datascale->add_flag("--auto-compact", d->auto_compact,
                      "Compact storage with last revision after test is finished.");
  datascale->add_flag("--auto-defrag", d->auto_defrag,
                      "Defragment storage after test is finished.");
  datascale->callback([&ctl, d] {
    Status status = ctl.Prepare();
    if (!status.ok()) return ctl.Finish(std::move(status));
    auto [outcome, exit_code] = RunCheckDatascale(ctl, *d);
    ctl.Finish(std::move(outcome), exit_code);
  });
}

}  // namespace epoch::ctl
