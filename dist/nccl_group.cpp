// The NCCL process group (nccl_group.h, Note [NCCL group]): built with the CUDA backend
// where the toolkit's NCCL is found.
#include "dist/nccl_group.h"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <nccl.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "cuda/streams.h"
#include "dist/store.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"

namespace fitgrad::dist {
namespace {

void check_cuda(cudaError_t e, const char* what) {
  FG_CHECK(e == cudaSuccess, "[dist] {}: {}", what, cudaGetErrorString(e));
}

void check_nccl(ncclResult_t r, const char* what) {
  FG_CHECK(r == ncclSuccess, "[dist] {}: {}", what, ncclGetErrorString(r));
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::f32: return ncclFloat32;
    case DType::f16: return ncclFloat16;
    case DType::bf16: return ncclBfloat16;
    case DType::i32: return ncclInt32;
    case DType::i64: return ncclInt64;
    case DType::u8: return ncclUint8;
    case DType::i8: return ncclInt8;
  }
  return ncclFloat32;
}

// Note [One owner of the communicator]
// ncclCommAbort frees the communicator, as ncclCommDestroy does: after an abort (an
// asynchronous error or a timeout seen by a Work's wait) neither may be called again, nor any
// collective be queued on it. The group and every Work it returns share one Communicator,
// which aborts at most once, destroys the communicator at the end only when it was not
// aborted, and refuses further use with the error that ended it. Before this, a Work's abort
// left the group's destructor to destroy the freed communicator (issue 46): the surviving rank
// of a job whose peer died could crash or hang instead of ending with the --ddp_timeout error.
class Communicator {
 public:
  Communicator() = default;
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;
  ~Communicator() {
    if (comm_ != nullptr && aborted_.empty()) ncclCommDestroy(comm_);
  }
  ncclComm_t* slot() { return &comm_; }
  // The communicator for a new collective or query; throws once it was aborted.
  ncclComm_t get() const {
    std::lock_guard lock(mutex_);
    FG_CHECK(aborted_.empty(),
             "[dist] the NCCL communicator was aborted after an earlier error: {}", aborted_);
    return comm_;
  }
  // Aborts the communicator (once) for `why`; later calls only keep the first reason.
  void abort(const std::string& why) {
    std::lock_guard lock(mutex_);
    if (!aborted_.empty()) return;
    aborted_ = why;
    ncclCommAbort(comm_);
  }

 private:
  ncclComm_t comm_ = nullptr;
  mutable std::mutex mutex_;
  std::string aborted_;  // empty while usable
};

// A collective queued on the group's stream: wait() polls its event and the communicator's
// asynchronous error until the timeout, then aborts the communicator (Note [One owner of the
// communicator]).
class NcclWork final : public Work {
 public:
  NcclWork(std::shared_ptr<Communicator> comm, cudaEvent_t done, std::chrono::milliseconds timeout,
           std::string what, Tensor keep)
      : comm_(std::move(comm)),
        done_(done),
        timeout_(timeout),
        what_(std::move(what)),
        keep_(std::move(keep)) {}
  // Note [Aborting a group] in process_group.h: a Work dropped while its collective runs
  // aborts the communicator, whose kernels then return, and keeps its buffer until the
  // collective has ended; where it has not within a second (its stream still waits for the
  // compute stream), the buffer is never freed rather than handed to another tensor the card
  // may still write through it.
  ~NcclWork() override {
    if (cudaEventQuery(done_) == cudaErrorNotReady) {
      comm_->abort(fmt::format(
          "[dist] {} was dropped while it ran (a failed step's all-reduce): the communicator "
          "was aborted so that this rank ends without waiting for its peers",
          what_));
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      while (cudaEventQuery(done_) == cudaErrorNotReady &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      if (cudaEventQuery(done_) == cudaErrorNotReady) static_cast<void>(new Tensor(keep_));
    }
    (void)cudaGetLastError();
    cudaEventDestroy(done_);
  }
  bool done() override { return cudaEventQuery(done_) != cudaErrorNotReady; }
  void wait() override {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      const cudaError_t e = cudaEventQuery(done_);
      if (e == cudaSuccess) return;
      FG_CHECK(e == cudaErrorNotReady, "[dist] {}: {}", what_, cudaGetErrorString(e));
      ncclResult_t async = ncclSuccess;
      ncclCommGetAsyncError(comm_->get(), &async);
      if (async != ncclSuccess) {
        const std::string why = fmt::format("[dist] {} failed: {} (NCCL does not say which peer)",
                                            what_, ncclGetErrorString(async));
        comm_->abort(why);
        throw Error(why);
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        const std::string why = fmt::format(
            "[dist] {} timed out after {} s (--ddp_timeout): a peer died or "
            "hangs; NCCL does not say which",
            what_, std::chrono::duration_cast<std::chrono::seconds>(timeout_).count());
        comm_->abort(why);
        throw Error(why);
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

 private:
  std::shared_ptr<Communicator> comm_;
  cudaEvent_t done_;
  std::chrono::milliseconds timeout_;
  std::string what_;
  Tensor keep_;  // the buffer stays alive while the collective runs
};

class NcclGroup final : public ProcessGroup {
 public:
  NcclGroup(const DistEnv& env, Device device, std::chrono::milliseconds timeout)
      : ProcessGroup(env.rank, env.world_size, timeout), device_(device) {
    check_cuda(cudaSetDevice(device.index), "cudaSetDevice");
    const auto store = open_store(env.store, timeout);
    meet_in_store(*store, env.store, env.rank, env.world_size, timeout);
    ncclUniqueId id;
    if (env.rank == 0) {
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      const char* bytes = reinterpret_cast<const char*>(&id);
      store->set("fitgrad.nccl_id", std::vector<char>(bytes, bytes + sizeof(id)));
    } else {
      store->wait({"fitgrad.nccl_id"}, timeout);
      const std::vector<char> bytes = store->get("fitgrad.nccl_id");
      FG_CHECK(bytes.size() == sizeof(id), "[dist] the store's NCCL id has {} bytes", bytes.size());
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    check_nccl(ncclCommInitRank(comm_->slot(), env.world_size, id, env.rank), "ncclCommInitRank");
    // Every rank has read the id once the communicator exists: the job's own store goes, and
    // each rank's keys in a Redis server (Note [A job removes its keys] in dist/store.h).
    remove_own_keys(*store);
    if (env.rank == 0 && env.own_store) {
      std::error_code ec;
      std::filesystem::remove_all(env.store.substr(5), ec);
    }
    check_cuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  ~NcclGroup() override {
    comm_.reset();  // destroyed here unless a Work still holds it (it then ends with the Work)
    cudaStreamDestroy(stream_);
  }

  std::string backend() const override { return "nccl"; }

  void abort(const std::string& why) override { comm_->abort(why); }  // Note [Aborting a group]

  std::shared_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    check_tensor("all_reduce", t);
    FG_CHECK(op == ReduceOp::sum || is_floating(t.dtype()),
             "[dist] all_reduce: avg of {} (an integer dtype); use sum", dtype_name(t.dtype()));
    begin();
    check_nccl(ncclAllReduce(t.data_ptr(), t.data_ptr(), size_t(t.numel()), nccl_type(t.dtype()),
                             op == ReduceOp::avg ? ncclAvg : ncclSum, comm_->get(), stream_),
               "ncclAllReduce");
    return end("all_reduce", t);
  }

  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override {
    check_tensor("reduce_scatter", input);
    check_tensor("reduce_scatter", output);
    const int64_t n = input.numel(), chunk = (n + size() - 1) / size();
    const Shard shard = shard_of(n, rank(), size());
    FG_CHECK(output.numel() == shard.size,
             "[dist] reduce_scatter: the output has {} elements, "
             "rank {}'s shard {}",
             output.numel(), rank(), shard.size);
    // NCCL takes equal shards: the input padded to size * chunk, the output one chunk.
    Tensor padded = staging(size() * chunk, input.dtype()), mine = staging(chunk, input.dtype());
    padded.fill_(0.0);
    padded.narrow(0, 0, n).copy_(input.reshape({n}));
    begin();
    check_nccl(ncclReduceScatter(padded.data_ptr(), mine.data_ptr(), size_t(chunk),
                                 nccl_type(input.dtype()), op == ReduceOp::avg ? ncclAvg : ncclSum,
                                 comm_->get(), stream_),
               "ncclReduceScatter");
    end("reduce_scatter", padded)->wait();
    output.reshape({shard.size}).copy_(mine.narrow(0, 0, shard.size));
  }

  void all_gather(const Tensor& shard, const Tensor& output) override {
    check_tensor("all_gather", shard);
    check_tensor("all_gather", output);
    const int64_t n = output.numel(), chunk = (n + size() - 1) / size();
    FG_CHECK(shard.numel() == shard_of(n, rank(), size()).size,
             "[dist] all_gather: rank {}'s shard of {} elements has {} elements, got {}", rank(), n,
             shard_of(n, rank(), size()).size, shard.numel());
    Tensor mine = staging(chunk, output.dtype()),
           gathered = staging(size() * chunk, output.dtype());
    mine.narrow(0, 0, shard.numel()).copy_(shard.reshape({shard.numel()}));
    begin();
    check_nccl(ncclAllGather(mine.data_ptr(), gathered.data_ptr(), size_t(chunk),
                             nccl_type(output.dtype()), comm_->get(), stream_),
               "ncclAllGather");
    end("all_gather", gathered)->wait();
    for (int r = 0; r < size(); ++r) {
      const Shard s = shard_of(n, r, size());
      output.reshape({n}).narrow(0, s.begin, s.size).copy_(gathered.narrow(0, r * chunk, s.size));
    }
  }

  void broadcast(const Tensor& t, int root) override {
    check_tensor("broadcast", t);
    begin();
    check_nccl(ncclBroadcast(t.data_ptr(), t.data_ptr(), size_t(t.numel()), nccl_type(t.dtype()),
                             root, comm_->get(), stream_),
               "ncclBroadcast");
    end("broadcast", t)->wait();
  }

  void barrier() override {
    Tensor one = staging(1, DType::f32);
    one.fill_(0.0);
    all_reduce(one, ReduceOp::sum);
  }

 private:
  Tensor staging(int64_t n, DType dtype) const {
    const MemoryContextScope scope({Category::collective, intern_label("dist.nccl_staging")});
    return Tensor::empty({n}, dtype, device_);
  }

  void check_tensor(const char* op, const Tensor& t) const {
    FG_CHECK(t.defined() && t.device() == device_,
             "[dist] {}: the NCCL group takes tensors on {}, got {}", op, device_.str(),
             t.defined() ? t.device().str() : std::string("an undefined tensor"));
    FG_CHECK(t.is_contiguous(), "[dist] {}: the tensor must be contiguous", op);
  }

  // The collective runs after the work queued so far on the device's compute stream
  // (cuda/streams.h); a Work's wait() returns once it is done.
  void begin() {
    cudaEvent_t before;
    check_cuda(cudaEventCreateWithFlags(&before, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(before, cuda::stream_of(device_.index, cuda::kComputeStream)),
               "cudaEventRecord");
    check_cuda(cudaStreamWaitEvent(stream_, before, 0), "cudaStreamWaitEvent");
    cudaEventDestroy(before);
  }

  std::shared_ptr<Work> end(const char* op, const Tensor& keep) {
    cudaEvent_t done;
    check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventRecord(done, stream_), "cudaEventRecord");
    return std::make_shared<NcclWork>(
        comm_, done, timeout(),
        fmt::format("{} of {} {} elements on rank {} of {}", op, keep.numel(),
                    dtype_name(keep.dtype()), rank(), size()),
        keep);
  }

  Device device_;
  std::shared_ptr<Communicator> comm_ = std::make_shared<Communicator>();
  cudaStream_t stream_ = nullptr;
};

}  // namespace

std::unique_ptr<ProcessGroup> make_nccl_group(const DistEnv& env, Device device,
                                              std::chrono::milliseconds timeout) {
  return std::make_unique<NcclGroup>(env, device, timeout);
}

}  // namespace fitgrad::dist
