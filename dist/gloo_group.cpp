// The Gloo process group (gloo_group.h): the rendezvous, the worker thread and the
// collectives.
#include "dist/gloo_group.h"

#include <fmt/format.h>
#include <gloo/allgatherv.h>
#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/config.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include "dist/local_process.h"
#include "dist/store.h"
#include "tensor/error.h"
#include "tensor/half.h"
#include "tensor/interrupt.h"
#include "tensor/memory/scope.h"

namespace fitgrad::dist {
namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
void sum_halves(void* c, const void* a, const void* b, size_t n) {
  auto* out = static_cast<uint16_t*>(c);
  const auto* x = static_cast<const uint16_t*>(a);
  const auto* y = static_cast<const uint16_t*>(b);
  for (size_t i = 0; i < n; ++i) out[i] = Narrow(Widen(x[i]) + Widen(y[i]));
}

ReduceFn sum_function(DType dtype) {
  switch (dtype) {
    case DType::f32: return &gloo::sum<float>;
    case DType::i32: return &gloo::sum<int32_t>;
    case DType::i64: return &gloo::sum<int64_t>;
    case DType::bf16: return &sum_halves<bf16_bits_to_f32, f32_to_bf16_bits>;
    case DType::f16: return &sum_halves<f16_bits_to_f32, f32_to_f16_bits>;
    default: return nullptr;
  }
}

// x /= n in place, for avg (Note [Collective semantics]).
void divide(const Tensor& t, int n) {
  const int64_t count = t.numel();
  switch (t.dtype()) {
    case DType::f32: {
      float* p = t.data<float>();
      for (int64_t i = 0; i < count; ++i) p[i] /= float(n);
      return;
    }
    case DType::bf16:
    case DType::f16: {
      const bool bf = t.dtype() == DType::bf16;
      auto* p = static_cast<uint16_t*>(t.data_ptr());
      for (int64_t i = 0; i < count; ++i) {
        const float v = (bf ? bf16_bits_to_f32(p[i]) : f16_bits_to_f32(p[i])) / float(n);
        p[i] = bf ? f32_to_bf16_bits(v) : f32_to_f16_bits(v);
      }
      return;
    }
    default: FG_ASSERT(false);
  }
}

// "[127.0.0.1]:40123" out of a transport address or a Gloo error message, or "".
std::string endpoint_in(const std::string& text) {
  static const std::regex endpoint(R"(\[[^\]]*\]:[0-9]+)");
  std::smatch m;
  return std::regex_search(text, m, endpoint) ? m[0].str() : "";
}

class Task final : public Work {
 public:
  explicit Task(std::future<void> done) : done_(std::move(done)) {}
  void wait() override {
    if (done_.valid()) done_.get();
  }
  bool done() override {
    return !done_.valid() || done_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  }

 private:
  std::future<void> done_;
};

class GlooGroup final : public ProcessGroup {
 public:
  explicit GlooGroup(const GlooOptions& o)
      : ProcessGroup(o.rank, o.size, o.timeout), remove_at_end_(o.remove_at_end) {
    FG_CHECK(o.size >= 1 && o.rank >= 0 && o.rank < o.size, "[dist] rank {} of world size {}",
             o.rank, o.size);
    const auto store = open_store(o.store, o.timeout);
    // Note [SIGPIPE and a dead peer]
    // Gloo's TCP pairs write with plain write()/writev(): a write to the socket of a peer that
    // died raises SIGPIPE, whose default action ends this process at once (exit status 141),
    // before the collective can fail with an error naming the peer. Python ignores SIGPIPE
    // at start-up, which is why torch's Gloo never meets it; a process with a Gloo group
    // ignores it too, and such a write fails with EPIPE, which Gloo turns into an exception.
    if (o.size > 1) ::signal(SIGPIPE, SIG_IGN);
    try {
      gloo::transport::tcp::attr attr;
      attr.hostname = o.hostname;
      auto device = gloo::transport::tcp::CreateDevice(attr);
      auto context = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
      context->setTimeout(o.timeout);
      meet_in_store(*store, o.store, o.rank, o.size, o.timeout);
      context->connectFullMesh(*store, device);
      context_ = context;
      // Note [Naming the failed peer]
      // Gloo's transport errors name the peer's address ("Connection closed by peer
      // [127.0.0.1]:40123"), not its rank, and the connection that fails first is not always
      // the one to the rank that died: in a ring, a survivor may first lose a neighbour that
      // is itself quitting over the failure. So every rank publishes in the store the
      // addresses it listens on (one per pair), its host and its process id, and a rank whose collective
      // fails marks that in the store before it throws. A failure then names the ranks on
      // this host whose process is gone without such a mark (they died first); failing
      // that (peers on other hosts), the rank behind the address in Gloo's message. A peer
      // that hangs (stopped, or stuck short of the collective) closes nothing: the others
      // time out in the same collective, each marks in the store that it reached it (by the
      // collective's tag, the same on every rank), waits up to 2 s for the others' marks,
      // and names the ranks that never reached it.
      peers_.assign(size_t(o.size), Peer{});
      host_ = host_name();
      if (o.size > 1) {
        // "<pid> <host> <endpoint to rank 0> <endpoint to rank 1> ...": this Gloo listens
        // on one address per pair.
        std::string mine = fmt::format("{} {}", ::getpid(), host_);
        for (int r = 0; r < o.size; ++r)
          mine += fmt::format(
              " {}", r == o.rank ? "-" : endpoint_in(context_->getPair(r)->address().str()));
        store->set(fmt::format("fitgrad.peer.{}", o.rank), {mine.begin(), mine.end()});
        for (int r = 0; r < o.size; ++r) {
          if (r == o.rank) continue;
          const std::string key = fmt::format("fitgrad.peer.{}", r);
          store->wait({key}, o.timeout);
          const std::vector<char> bytes = store->get(key);
          std::istringstream in(std::string(bytes.begin(), bytes.end()));
          Peer& p = peers_[size_t(r)];
          in >> p.pid >> p.host;
          for (int k = 0; k <= o.rank; ++k) in >> p.endpoint;  // its pair to this rank
        }
      }
      store_ = store;
    } catch (const Error&) {
      throw;
    } catch (const Interrupted&) {
      throw;
    } catch (const std::exception& e) {
      throw Error(fmt::format("[dist] rendezvous of rank {} of {} through {} failed: {}", o.rank,
                              o.size, o.store, e.what()));
    }
    worker_ = std::thread([this] { work(); });
  }

  ~GlooGroup() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    ready_.notify_all();
    worker_.join();
    if (store_ && !failed_) remove_own_keys(*store_);  // Note [A job removes its keys]
    if (rank() == 0 && !remove_at_end_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(remove_at_end_, ec);
    }
  }

  std::string backend() const override { return "gloo"; }

  // Note [Aborting a group] in process_group.h: the queued collectives end at once with the
  // reason; the one the worker runs ends at its timeout.
  void abort(const std::string& why) override {
    std::lock_guard lock(mutex_);
    if (aborted_.empty()) aborted_ = why;
  }

  std::shared_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    check_tensor("all_reduce", t);
    const ReduceFn fn = sum_function(t.dtype());
    FG_CHECK(fn, "[dist] all_reduce: dtype {} is not reducible over Gloo", dtype_name(t.dtype()));
    FG_CHECK(op == ReduceOp::sum || is_floating(t.dtype()),
             "[dist] all_reduce: avg of {} (an integer dtype); use sum", dtype_name(t.dtype()));
    const uint32_t tag = tag_++;
    return enqueue("all_reduce", describe_tensor(t), tag, [this, t, op, fn, tag] {
      if (t.numel() == 0) return;
      gloo::AllreduceOptions o(context_);
      o.setTag(tag);
      o.setTimeout(timeout());
      const size_t esize = element_size(t.dtype());
      auto buffer = context_->createUnboundBuffer(t.data_ptr(), size_t(t.numel()) * esize);
      set_output(o, std::move(buffer), t.dtype());
      o.setReduceFunction(fn);
      gloo::allreduce(o);
      if (op == ReduceOp::avg && size() > 1) divide(t, size());
    });
  }

  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override {
    check_tensor("reduce_scatter", input);
    check_tensor("reduce_scatter", output);
    const Shard shard = shard_of(input.numel(), rank(), size());
    FG_CHECK(output.numel() == shard.size && output.dtype() == input.dtype(),
             "[dist] reduce_scatter: rank {}'s shard of {} elements has {} elements ({}), the "
             "output has {} ({})",
             rank(), input.numel(), shard.size, dtype_name(input.dtype()), output.numel(),
             dtype_name(output.dtype()));
    // Note [Reduce-scatter as an all-reduce]
    Tensor staging;
    {
      const MemoryContextScope scope({Category::collective, intern_label("dist.reduce_scatter")});
      staging = Tensor::empty({input.numel()}, input.dtype(), input.device());
    }
    staging.copy_(input.reshape({input.numel()}));
    all_reduce(staging, op);
    output.reshape({shard.size}).copy_(staging.narrow(0, shard.begin, shard.size));
  }

  void all_gather(const Tensor& shard, const Tensor& output) override {
    check_tensor("all_gather", shard);
    check_tensor("all_gather", output);
    const int64_t n = output.numel();
    FG_CHECK(shard.numel() == shard_of(n, rank(), size()).size && shard.dtype() == output.dtype(),
             "[dist] all_gather: rank {}'s shard of {} elements has {} elements, got {}", rank(), n,
             shard_of(n, rank(), size()).size, shard.numel());
    const size_t esize = element_size(output.dtype());
    std::vector<size_t> counts;
    for (int r = 0; r < size(); ++r) counts.push_back(size_t(shard_of(n, r, size()).size) * esize);
    const uint32_t tag = tag_++;
    enqueue("all_gather", describe_tensor(output), tag, [this, shard, output, counts, tag] {
      if (output.numel() == 0) return;
      gloo::AllgathervOptions o(context_);
      o.setTag(tag);
      o.setTimeout(timeout());
      o.setInput(static_cast<uint8_t*>(shard.data_ptr()), counts[size_t(rank())]);
      o.setOutput(static_cast<uint8_t*>(output.data_ptr()), counts);
      gloo::allgatherv(o);
    })->wait();
  }

  void broadcast(const Tensor& t, int root) override {
    check_tensor("broadcast", t);
    FG_CHECK(root >= 0 && root < size(), "[dist] broadcast: root {} of world size {}", root,
             size());
    const uint32_t tag = tag_++;
    enqueue("broadcast", describe_tensor(t), tag, [this, t, root, tag] {
      if (t.numel() == 0) return;
      gloo::BroadcastOptions o(context_);
      o.setTag(tag);
      o.setTimeout(timeout());
      o.setRoot(root);
      o.setOutput(static_cast<uint8_t*>(t.data_ptr()), t.nbytes());
      gloo::broadcast(o);
    })->wait();
  }

  void barrier() override {
    const uint32_t tag = tag_++;
    enqueue("barrier", "", tag, [this, tag] {
      gloo::BarrierOptions o(context_);
      o.setTag(tag);
      o.setTimeout(timeout());
      gloo::barrier(o);
    })->wait();
  }

 private:
  static void set_output(gloo::AllreduceOptions& o,
                         std::unique_ptr<gloo::transport::UnboundBuffer> buffer, DType dtype) {
    switch (element_size(dtype)) {
      case 2: o.setOutput<uint16_t>(std::move(buffer)); return;
      case 4: o.setOutput<uint32_t>(std::move(buffer)); return;
      case 8: o.setOutput<uint64_t>(std::move(buffer)); return;
      default: FG_ASSERT(false);
    }
  }

  static std::string describe_tensor(const Tensor& t) {
    return fmt::format(" of {} {} elements", t.numel(), dtype_name(t.dtype()));
  }

  void check_tensor(const char* op, const Tensor& t) const {
    FG_CHECK(t.defined() && t.device().type == DeviceType::cpu,
             "[dist] {}: the Gloo group takes cpu tensors, got {}", op,
             t.defined() ? t.device().str() : std::string("an undefined tensor"));
    FG_CHECK(t.is_contiguous(), "[dist] {}: the tensor must be contiguous", op);
  }

  // The error of a collective, with the rank behind the failed connection when Gloo's message
  // names its address (Note [Naming the failed peer]).
  std::string explain(const std::string& op, const std::string& what, uint32_t tag,
                      const std::string& message) const {
    // A killed process closes its sockets a moment before it is seen gone: look for up to
    // a second.
    std::string gone;
    bool store_lost = false;
    for (int attempt = 0; attempt < 50 && gone.empty() && !store_lost; ++attempt) {
      if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
      for (int r = 0; r < size(); ++r) {
        const Peer& p = peers_[size_t(r)];
        if (r == rank() || p.host != host_ || p.pid <= 0) continue;
        if (process_runs(p.pid)) continue;  // Note [A pid is a process's]
        const std::optional<bool> marked = marked_failed(r);
        // Without the store a peer that quit over the failure, as this rank does, cannot be
        // told from one that died first.
        if (!marked) store_lost = true;
        if (!marked || *marked) continue;
        gone += (gone.empty() ? "rank " : ", rank ") + std::to_string(r);
      }
    }
    std::string named;
    const std::string endpoint = endpoint_in(message);
    for (int r = 0; r < size() && !endpoint.empty(); ++r)
      if (r != rank() && peers_[size_t(r)].endpoint == endpoint) named = fmt::format("rank {}", r);
    const std::string behind =
        gone.empty() && named.empty() && !store_lost ? not_reached(tag) : std::string();
    const std::string peer =
        !gone.empty()    ? fmt::format("the peer that failed is {} (its process is gone)", gone)
        : !named.empty() ? fmt::format("the peer that failed is {} (its connection failed)", named)
        : !behind.empty()
            ? fmt::format(
                  "the peer that failed is {} (it never reached this collective: stopped "
                  "or hung)",
                  behind)
        : store_lost
            ? std::string(
                  "no peer can be named: the rendezvous store is unreachable from this rank too, "
                  "so the network between the hosts may be down")
            : std::string("the transport does not say which peer failed");
    return fmt::format("[dist] {}{} failed on rank {} of {} ({}): {}; --ddp_timeout is {} s", op,
                       what, rank(), size(), peer, message,
                       std::chrono::duration_cast<std::chrono::seconds>(timeout()).count());
  }

  // Note [Naming the failed peer]: the ranks that did not mark collective `tag` as reached
  // within 2 s of this rank's mark ("rank 1, rank 3"), or "" when every rank did or the
  // store cannot say.
  std::string not_reached(uint32_t tag) const {
    auto key = [tag](int r) { return fmt::format("fitgrad.reached.{}.{}", tag, r); };
    std::vector<bool> seen(size_t(size()), false);
    seen[size_t(rank())] = true;
    try {
      store_->set(key(rank()), {'1'});
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
      for (bool all = false; !all && std::chrono::steady_clock::now() < until;) {
        all = true;
        for (int r = 0; r < size(); ++r) {
          if (seen[size_t(r)]) continue;
          try {
            store_->wait({key(r)}, std::chrono::milliseconds(1));
            seen[size_t(r)] = true;
          } catch (const std::exception&) {
            all = false;
          }
        }
        if (!all) std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    } catch (const std::exception&) {
      return "";  // the store is unreachable too
    }
    std::string out;
    for (int r = 0; r < size(); ++r)
      if (!seen[size_t(r)]) out += (out.empty() ? "rank " : ", rank ") + std::to_string(r);
    return out;
  }

  // Note [Naming the failed peer]: whether the store holds rank r's mark that its collective
  // failed; nullopt when the store cannot say (it is unreachable too).
  std::optional<bool> marked_failed(int r) const {
    try {
      store_->wait({fmt::format("fitgrad.failed.{}", r)}, std::chrono::milliseconds(1));
      return true;
    } catch (const gloo::IoException&) {
      return false;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

  void refuse_if_aborted() {
    std::lock_guard lock(mutex_);
    FG_CHECK(aborted_.empty(), "[dist] the Gloo group was aborted: {}", aborted_);
  }

  void mark_failed() {
    failed_ = true;
    try {
      store_->set(fmt::format("fitgrad.failed.{}", rank()), {'1'});
    } catch (const std::exception&) {
      // The store is unreachable too: the error says what it can without the mark.
    }
  }

  std::shared_ptr<Work> enqueue(const char* op, std::string what, uint32_t tag,
                                std::function<void()> fn) {
    // The collective's closure, and the tensors it holds, die on the worker before the Work
    // is done: when wait() returns, a buffer the caller dropped is back in the allocator, so
    // the ledger's events do not depend on the worker's timing (a plan makes them on meta
    // in program order, Note [Planning one rank] in dist/meta_group.h).
    refuse_if_aborted();
    std::packaged_task<void()> task(
        [this, op, tag, what = std::move(what), fn = std::move(fn)]() mutable {
          const std::function<void()> run = std::move(fn);
          refuse_if_aborted();  // queued before the abort: not run
          try {
            run();
          } catch (const Error&) {
            throw;
          } catch (const std::exception& e) {
            mark_failed();
            throw Error(explain(op, what, tag, e.what()));
          }
        });
    auto work = std::make_shared<Task>(task.get_future());
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(task));
    }
    ready_.notify_one();
    return work;
  }

  void work() {
    for (;;) {
      std::packaged_task<void()> task;
      {
        std::unique_lock lock(mutex_);
        ready_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  // Each rank's transport address ("[ip]:port"), process id and host (Note [Naming the
  // failed peer]).
  struct Peer {
    std::string endpoint;
    int64_t pid = 0;
    std::string host;
  };
  std::shared_ptr<gloo::Context> context_;
  std::shared_ptr<gloo::rendezvous::Store> store_;
  std::string remove_at_end_;        // GlooOptions::remove_at_end
  std::atomic<bool> failed_{false};  // a collective failed: the store keeps this rank's keys
  std::vector<Peer> peers_;
  std::string host_;
  uint32_t tag_ = 0;  // advanced by the calling thread only
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<std::packaged_task<void()>> queue_;
  bool stop_ = false;
  std::string aborted_;  // Note [Aborting a group]; empty while usable
  std::thread worker_;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_gloo_group(const GlooOptions& options) {
  return std::make_unique<GlooGroup>(options);
}

}  // namespace fitgrad::dist
