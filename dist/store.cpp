// The ranks' rendezvous store (store.h): waits that stop on a signal, and the first meeting.
#include "dist/store.h"

#include <fmt/format.h>
#include <gloo/common/error.h>
#include <gloo/config.h>  // GLOO_USE_REDIS, which no rendezvous header defines
#include <gloo/rendezvous/file_store.h>
#include <hiredis.h>
#if GLOO_USE_REDIS
#include <gloo/rendezvous/redis_store.h>
#endif
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>

#include "dist/local_process.h"
#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::dist {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// One request's longest wait for an answer (a healthy store answers in milliseconds).
constexpr milliseconds kRequestBound{10000};

// Note [A store that stops answering]: `request()` run on a helper thread and waited for in
// 100 ms slices that read the stop flag, at most `bound`; its answer, or a fitgrad::Error
// naming the store `spec`. Sets `abandoned` when it leaves the helper running.
template <class Request>
auto answer_within(const std::string& spec, const char* what, milliseconds bound, Request request,
                   std::atomic<bool>& abandoned) -> decltype(request()) {
  using Answer = decltype(request());
  auto answer = std::make_shared<std::promise<Answer>>();
  std::future<Answer> future = answer->get_future();
  std::thread([answer, request = std::move(request)]() mutable {
    try {
      answer->set_value(request());
    } catch (...) {
      answer->set_exception(std::current_exception());
    }
  }).detach();
  const auto end = Clock::now() + bound;
  while (future.wait_for(milliseconds(100)) != std::future_status::ready) {
    if (const int sig = interrupt_received()) {
      abandoned = true;
      throw Interrupted(sig);
    }
    if (Clock::now() >= end) {
      abandoned = true;
      throw Error(fmt::format(
          "[dist] the rendezvous store {} did not answer a {} within {} s: its server is down or "
          "unreachable from this host (a link down, a firewall); check that every host reaches "
          "it",
          spec, what, std::chrono::duration_cast<std::chrono::seconds>(bound).count()));
    }
  }
  try {
    return future.get();
  } catch (const std::exception& e) {
    throw Error(fmt::format(
        "[dist] the rendezvous store {} failed a {}: {}; is its server up, and reachable from "
        "this host? (a job across hosts meets in a Redis server at MASTER_ADDR:MASTER_PORT or "
        "--rdzv_endpoint, started before the ranks: redis-server --bind HOST --port PORT "
        "--protected-mode no --save '')",
        spec, what, e.what()));
  }
}

// Deletes `keys` from the Redis server `server` over a connection of its own, each step bounded by 2 s; best effort: a server that is gone keeps them, and the
// next job there is refused with the fix (Note [Meeting in the store]).
void delete_redis_keys(const Endpoint& server, const std::vector<std::string>& keys) {
  const timeval bound = {2, 0};
  redisContext* c = redisConnectWithTimeout(server.host.c_str(), server.port, bound);
  if (!c) return;
  if (!c->err && redisSetTimeout(c, bound) == REDIS_OK) {
    std::vector<const char*> argv = {"DEL"};
    std::vector<size_t> lengths = {3};
    for (const std::string& k : keys) {
      argv.push_back(k.data());
      lengths.push_back(k.size());
    }
    if (void* reply = redisCommandArgv(c, int(argv.size()), argv.data(), lengths.data()))
      freeReplyObject(reply);
  }
  redisFree(c);
}

// Note [Waits that stop], Note [A store that stops answering]
class StoppableStore final : public gloo::rendezvous::Store {
 public:
  StoppableStore(std::shared_ptr<gloo::rendezvous::Store> inner, std::string spec,
                 milliseconds timeout)
      : inner_(std::move(inner)), spec_(std::move(spec)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    ask("set", kRequestBound, [key, data](gloo::rendezvous::Store& s) {
      s.set(key, data);
      return true;
    });
    std::lock_guard lock(mutex_);
    written_.push_back(key);
  }

  // Note [A job removes its keys]
  void remove_written_keys() {
    if (gone_ || !spec_.starts_with("redis:")) return;
    std::vector<std::string> keys;
    {
      std::lock_guard lock(mutex_);
      keys.swap(written_);
    }
    if (!keys.empty()) delete_redis_keys(*parse_endpoint(spec_.substr(6)), keys);
  }
  std::vector<char> get(const std::string& key) override {
    wait({key}, timeout_);
    return ask("get", kRequestBound, [key](gloo::rendezvous::Store& s) { return s.get(key); });
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override {
    constexpr milliseconds kSlice{100};
    const auto end = Clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now());
      const milliseconds slice = std::clamp(left, milliseconds(1), kSlice);
      const bool there =
          ask("wait", slice + kRequestBound, [keys, slice](gloo::rendezvous::Store& s) {
            try {
              s.wait(keys, slice);
              return true;
            } catch (const gloo::IoException& e) {
              // Not yet: Gloo's wait timed out. Any other IoException is the store failing
              // ("Server closed the connection").
              if (std::string_view(e.what()).find("Wait timeout") != std::string_view::npos)
                return false;
              throw std::runtime_error(e.what());
            }
          });
      if (there) return;
      if (left <= kSlice)
        throw gloo::IoException(fmt::format("[dist] timed out waiting for {} in the store {}",
                                            keys.empty() ? std::string() : keys.front(), spec_));
      if (const int sig = interrupt_received()) throw Interrupted(sig);
    }
  }

 private:
  // `request` on the inner store, answered within `bound` (answer_within), once the store
  // is not gone.
  template <class Request>
  auto ask(const char* what, milliseconds bound, Request request)
      -> decltype(request(std::declval<gloo::rendezvous::Store&>())) {
    FG_CHECK(!gone_,
             "[dist] the rendezvous store {} stopped answering earlier in this process; its "
             "server is down or unreachable from this host",
             spec_);
    // The helper holds the store: a helper left blocked on a dead connection keeps it alive,
    // and nothing else touches the store after it (gone_).
    return answer_within(
        spec_, what, bound,
        [inner = inner_, request = std::move(request)]() mutable { return request(*inner); },
        gone_);
  }

  std::shared_ptr<gloo::rendezvous::Store> inner_;
  std::string spec_;
  milliseconds timeout_;
  std::atomic<bool> gone_{false};
  std::mutex mutex_;
  std::vector<std::string> written_;  // the keys this process set
};

struct RankKey {
  long pid = 0;
  std::string host;
  int world_size = 0;
};

RankKey parse(const std::vector<char>& bytes) {
  RankKey k;
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  in >> k.pid >> k.host >> k.world_size;
  return k;
}

// Whether the process that wrote `k` is known to be gone (on this host only).
bool gone(const RankKey& k, const std::string& host) {
  return k.host == host && k.pid > 0 && !process_runs(k.pid);  // Note [A pid is a process's]
}

std::string how_to_clear(const std::string& spec) {
  if (spec.starts_with("file:"))
    return fmt::format(
        "remove it (rm -r {}) or give the job a fresh store: another MASTER_PORT, or "
        "FITGRAD_STORE=file:<a new directory>",
        spec.substr(5));
  if (const auto server =
          spec.starts_with("redis:") ? parse_endpoint(spec.substr(6)) : std::nullopt)
    return fmt::format(
        "a job that ends removes its keys, one that was killed leaves them: clear them "
        "(redis-cli -h {} -p {} flushdb) once no job uses the server, or start a fresh server",
        server->host, server->port);
  return "clear it, or give the job a fresh store: another MASTER_PORT or FITGRAD_STORE";
}

std::string stale(const std::string& spec, int rank, const RankKey& k) {
  return fmt::format(
      "[dist] the rendezvous store {} holds an earlier job's keys (rank {}'s, written by pid {} "
      "on {}, which is gone): {}",
      spec, rank, k.pid, k.host, how_to_clear(spec));
}

}  // namespace

std::optional<Endpoint> parse_endpoint(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos || colon == 0) return std::nullopt;
  const std::string port = text.substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  const int number = std::stoi(port);
  if (number < 1 || number > 65535) return std::nullopt;
  return Endpoint{text.substr(0, colon), number};
}

std::shared_ptr<gloo::rendezvous::Store> open_store(const std::string& spec, milliseconds timeout) {
  std::shared_ptr<gloo::rendezvous::Store> inner;
  if (spec.starts_with("file:")) {
    inner = std::make_shared<gloo::rendezvous::FileStore>(spec.substr(5));
  } else if (spec.starts_with("redis:")) {
#if GLOO_USE_REDIS
    const std::optional<Endpoint> server = parse_endpoint(spec.substr(6));
    FG_CHECK(server, "[dist] store {}: expected redis:<host>:<port>, the port in [1, 65535]", spec);
    std::atomic<bool> abandoned{false};
    inner = answer_within(
        spec, "connection", kRequestBound,
        [server = *server]() -> std::shared_ptr<gloo::rendezvous::Store> {
          return std::make_shared<gloo::rendezvous::RedisStore>(server.host, server.port);
        },
        abandoned);
#else
    throw Error(fmt::format("[dist] store {}: this Gloo was built without Redis", spec));
#endif
  } else {
    throw Error(fmt::format("[dist] store '{}': expected file:<dir> or redis:<host>:<port>", spec));
  }
  return std::make_shared<StoppableStore>(std::move(inner), spec, timeout);
}

void remove_own_keys(gloo::rendezvous::Store& store) {
  if (auto* s = dynamic_cast<StoppableStore*>(&store)) s->remove_written_keys();
}

void meet_in_store(gloo::rendezvous::Store& store, const std::string& spec, int rank,
                   int world_size, milliseconds timeout) {
  const std::string host = host_name();
  const auto key_of = [](int r) { return fmt::format("fitgrad.rank.{}", r); };
  const std::string mine = fmt::format("{} {} {}", ::getpid(), host, world_size);
  try {
    store.set(key_of(rank), {mine.begin(), mine.end()});
  } catch (const std::exception& e) {
    RankKey there;
    try {
      store.wait({key_of(rank)}, milliseconds(1));  // is the key there, or was the write refused?
      there = parse(store.get(key_of(rank)));
    } catch (const std::exception&) {
      throw Error(
          fmt::format("[dist] rank {} cannot write its key to the rendezvous store {}: {}; {}",
                      rank, spec, e.what(),
                      spec.starts_with("file:")
                          ? "give FITGRAD_STORE=file:<dir> a directory that every rank can write"
                          : "check that the store's server runs and accepts writes"));
    }
    if (gone(there, host)) throw Error(stale(spec, rank, there));
    throw Error(fmt::format(
        "[dist] two processes claim RANK {}: pid {} on {} and pid {} on {} (this one), both "
        "through the rendezvous store {}; give every process of the job its own RANK in [0, "
        "WORLD_SIZE). If pid {} is an earlier job's, {}",
        rank, there.pid, there.host, ::getpid(), host, spec, there.pid, how_to_clear(spec)));
  }
  for (int r = 0; r < world_size; ++r) {
    if (r == rank) continue;
    try {
      store.wait({key_of(r)}, timeout);
    } catch (const gloo::IoException&) {  // a store that failed throws fitgrad::Error
      throw Error(fmt::format(
          "[dist] rank {} waited {} s in the rendezvous store {} for rank {}, which never came: "
          "start all WORLD_SIZE={} processes of the job with the same store (MASTER_ADDR and "
          "MASTER_PORT, or FITGRAD_STORE), or give them longer with --ddp_timeout",
          rank, std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), spec, r,
          world_size));
    }
    const RankKey peer = parse(store.get(key_of(r)));
    // Note [Meeting in the store]: the disagreement first, then whether the peer is gone.
    const bool runs_here = peer.host == host && process_runs(peer.pid);
    FG_CHECK(peer.world_size == world_size,
             "[dist] the ranks disagree on WORLD_SIZE: rank {} (pid {} on {}) has {}, rank {} "
             "(pid {} on {}, this one) has {}; start every process of the job with the same "
             "WORLD_SIZE{}",
             r, peer.pid, peer.host, peer.world_size, rank, ::getpid(), host, world_size,
             runs_here ? std::string()
                       : fmt::format(". If pid {} is an earlier job's, {}", peer.pid,
                                     how_to_clear(spec)));
    if (gone(peer, host)) throw Error(stale(spec, r, peer));
  }
}

}  // namespace fitgrad::dist
