// A process group: the ranks of one data-parallel job and the collectives between them
// (all-reduce, reduce-scatter, all-gather, broadcast, barrier) on tensors of one device
// type. Backends: Gloo for cpu tensors (dist/gloo_group.h), NCCL for cuda tensors
// (dist/nccl_group.h, built with the CUDA backend). dist/rendezvous.h makes the group of a
// process from torchrun's environment.
//
// Note [Collective semantics]
// Every rank calls the same collectives in the same order with tensors of the same dtype and
// size; a call returns when this rank's part is done. Tensors are contiguous and are
// reduced in place (all_reduce, broadcast) or written into `output`. avg is the sum divided
// by the world size (floating dtypes only). Sharded collectives cut a flat tensor of n
// elements into world-size shards by shard_of() -- ceil(n / N) elements each, the last
// ones shorter or empty -- so sizes need not divide by the world size. Every collective
// waits at most the group's timeout (--ddp_timeout); a peer that died or hangs makes it
// throw fitgrad::Error "[dist] <op> ...", naming the peer's rank when the transport tells
// which connection failed. After such an error the group is unusable: the job ends.
//
// Note [Aborting a group]
// A rank whose step failed keeps that step's all-reduces in flight (Note [Orphaned
// all-reduces] in dist/ddp.cpp): a peer may never join them. Waiting for them at the end
// would hang the failed rank's exit until the launcher kills it (under srun or mpirun without
// kill-on-bad-exit, for ever): NCCL's ncclCommDestroy waits for a pending collective, and
// Gloo's worker runs every queued one to its timeout. So when the buckets end with a
// collective still pending they abort the group, as PyTorch aborts its communicator: NCCL's
// communicator is aborted (its kernels return; a Work dropped while its collective runs
// aborts it too, and keeps its buffer until the collective ends), Gloo runs no queued
// collective (the one running still ends at its timeout, since Gloo cannot cancel it), and the
// group refuses every later call with the reason.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "tensor/tensor.h"

namespace fitgrad::dist {

enum class ReduceOp { sum, avg };

// A collective in flight; wait() returns when it is done and rethrows its error.
class Work {
 public:
  virtual ~Work() = default;
  virtual void wait() = 0;
  // Whether the collective has ended (well or not), without waiting.
  virtual bool done() = 0;
};

// The shard of rank `rank` of a flat tensor of n elements cut into `world` shards.
struct Shard {
  int64_t begin = 0;
  int64_t size = 0;
};
Shard shard_of(int64_t n, int rank, int world);

class ProcessGroup {
 public:
  ProcessGroup(int rank, int size, std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), timeout_(timeout) {}
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  virtual std::string backend() const = 0;

  // `t` reduced in place across the ranks, started now and finished by the Work's wait()
  // (Note [DDP buckets] in dist/ddp.h overlaps it with the backward). `t` must stay alive
  // and untouched until then.
  virtual std::shared_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) = 0;
  void all_reduce(const Tensor& t, ReduceOp op) { all_reduce_async(t, op)->wait(); }
  // input (n) on every rank -> output (shard_of(n, rank, size).size): this rank's shard of
  // the reduction.
  virtual void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) = 0;
  // shard (shard_of(n, rank, size).size) on every rank -> output (n): the shards in rank
  // order.
  virtual void all_gather(const Tensor& shard, const Tensor& output) = 0;
  // `t` on every rank becomes root's `t`.
  virtual void broadcast(const Tensor& t, int root) = 0;
  virtual void barrier() = 0;
  // Ends the group for `why` (Note [Aborting a group]): the collectives in flight or queued
  // end without waiting for their peers, and every later call throws an Error naming `why`.
  virtual void abort(const std::string& why) = 0;

 private:
  int rank_;
  int size_;
  std::chrono::milliseconds timeout_;
};

}  // namespace fitgrad::dist
