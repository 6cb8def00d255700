// The ranks' rendezvous store (store.h): waits that stop on a signal, and the first meeting.
#include "dist/store.h"

#include <fmt/format.h>
#include <gloo/rendezvous/file_store.h>
#if GLOO_USE_REDIS
#include <gloo/rendezvous/redis_store.h>
#endif
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <sstream>

#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::dist {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Note [Waits that stop]
class StoppableStore final : public gloo::rendezvous::Store {
 public:
  StoppableStore(std::shared_ptr<gloo::rendezvous::Store> inner, milliseconds timeout)
      : inner_(std::move(inner)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    inner_->set(key, data);
  }
  std::vector<char> get(const std::string& key) override {
    wait({key}, timeout_);
    return inner_->get(key);
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const milliseconds& timeout) override {
    constexpr milliseconds kSlice{100};
    const auto end = Clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(end - Clock::now());
      try {
        inner_->wait(keys, std::clamp(left, milliseconds(1), kSlice));
        return;
      } catch (const std::exception&) {
        if (left <= kSlice) throw;
      }
      if (const int sig = interrupt_received()) throw Interrupted(sig);
    }
  }

 private:
  std::shared_ptr<gloo::rendezvous::Store> inner_;
  milliseconds timeout_;
};

struct RankKey {
  long pid = 0;
  std::string host;
  int world_size = 0;
};

std::string this_host() {
  char name[256] = {};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

RankKey parse(const std::vector<char>& bytes) {
  RankKey k;
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  in >> k.pid >> k.host >> k.world_size;
  return k;
}

// Whether the process that wrote `k` is known to be gone (on this host only).
bool gone(const RankKey& k, const std::string& host) {
  return k.host == host && k.pid > 0 && ::kill(pid_t(k.pid), 0) != 0 && errno == ESRCH;
}

std::string how_to_clear(const std::string& spec) {
  if (spec.starts_with("file:"))
    return fmt::format(
        "remove it (rm -r {}) or give the job a fresh store: another MASTER_PORT, or "
        "FITGRAD_STORE=file:<a new directory>",
        spec.substr(5));
  return "clear it, or give the job a fresh store: another MASTER_PORT or FITGRAD_STORE";
}

std::string stale(const std::string& spec, int rank, const RankKey& k) {
  return fmt::format(
      "[dist] the rendezvous store {} holds an earlier job's keys (rank {}'s, written by pid {} "
      "on {}, which is gone): {}",
      spec, rank, k.pid, k.host, how_to_clear(spec));
}

}  // namespace

std::shared_ptr<gloo::rendezvous::Store> open_store(const std::string& spec, milliseconds timeout) {
  std::shared_ptr<gloo::rendezvous::Store> inner;
  if (spec.starts_with("file:")) {
    inner = std::make_shared<gloo::rendezvous::FileStore>(spec.substr(5));
  } else if (spec.starts_with("redis:")) {
#if GLOO_USE_REDIS
    const std::string rest = spec.substr(6);
    const size_t colon = rest.rfind(':');
    FG_CHECK(colon != std::string::npos, "[dist] store {}: expected redis:<host>:<port>", spec);
    inner = std::make_shared<gloo::rendezvous::RedisStore>(rest.substr(0, colon),
                                                           std::stoi(rest.substr(colon + 1)));
#else
    throw Error(fmt::format("[dist] store {}: this Gloo was built without Redis", spec));
#endif
  } else {
    throw Error(fmt::format("[dist] store '{}': expected file:<dir> or redis:<host>:<port>", spec));
  }
  return std::make_shared<StoppableStore>(std::move(inner), timeout);
}

void meet_in_store(gloo::rendezvous::Store& store, const std::string& spec, int rank,
                   int world_size, milliseconds timeout) {
  const std::string host = this_host();
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
    } catch (const Interrupted&) {
      throw;
    } catch (const std::exception&) {
      throw Error(fmt::format(
          "[dist] rank {} waited {} s in the rendezvous store {} for rank {}, which never came: "
          "start all WORLD_SIZE={} processes of the job with the same store (MASTER_ADDR and "
          "MASTER_PORT, or FITGRAD_STORE), or give them longer with --ddp_timeout",
          rank, std::chrono::duration_cast<std::chrono::seconds>(timeout).count(), spec, r,
          world_size));
    }
    const RankKey peer = parse(store.get(key_of(r)));
    if (gone(peer, host)) throw Error(stale(spec, r, peer));
    FG_CHECK(peer.world_size == world_size,
             "[dist] the ranks disagree on WORLD_SIZE: rank {} (pid {} on {}) has {}, rank {} "
             "(pid {} on {}, this one) has {}; start every process of the job with the same "
             "WORLD_SIZE",
             r, peer.pid, peer.host, peer.world_size, rank, ::getpid(), host, world_size);
  }
}

}  // namespace fitgrad::dist
