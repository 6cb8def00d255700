// The process group of a plan (meta_group.h, Note [Planning one rank]).
#include "dist/meta_group.h"

#include <algorithm>

#include "tensor/error.h"

namespace fitgrad::dist {
namespace {

class Done : public Work {
 public:
  void wait() override {}
  bool done() override { return true; }
};

class MetaGroup : public ProcessGroup {
 public:
  MetaGroup(int rank, int world) : ProcessGroup(rank, world, std::chrono::milliseconds(0)) {}

  std::string backend() const override { return "meta"; }

  std::shared_ptr<Work> all_reduce_async(const Tensor&, ReduceOp) override {
    return std::make_shared<Done>();
  }

  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp) override {
    const Shard s = shard_of(input.numel(), rank(), size());
    FG_CHECK(output.numel() == s.size, "[dist] reduce_scatter: the output has {} elements, not {}",
             output.numel(), s.size);
    Tensor(output).copy_(
        input.reshape({input.numel()}).narrow(0, s.begin, s.size).reshape(output.shape()));
  }

  void all_gather(const Tensor& shard, const Tensor& output) override {
    const int64_t n = output.numel();
    FG_CHECK(shard.numel() == shard_of(n, rank(), size()).size,
             "[dist] all_gather: rank {}'s shard of {} elements has {} elements, got {}", rank(), n,
             shard_of(n, rank(), size()).size, shard.numel());
    Tensor flat = output.reshape({n});
    const Tensor mine = shard.reshape({shard.numel()});
    for (int r = 0; r < size(); ++r) {
      const Shard s = shard_of(n, r, size());
      const int64_t copied = std::min(s.size, mine.numel());
      if (copied > 0) flat.narrow(0, s.begin, copied).copy_(mine.narrow(0, 0, copied));
    }
  }

  void broadcast(const Tensor&, int root) override {
    FG_CHECK(root >= 0 && root < size(), "[dist] broadcast: root {} of world size {}", root,
             size());
  }

  void barrier() override {}
  // A plan's collectives are done when they return: nothing is in flight to abort.
  void abort(const std::string&) override {}
};

}  // namespace

std::unique_ptr<ProcessGroup> make_meta_group(int rank, int world) {
  FG_CHECK(world >= 1 && rank >= 0 && rank < world,
           "[dist] a planned rank {} of world size {}: the rank must be in [0, world size)", rank,
           world);
  return std::make_unique<MetaGroup>(rank, world);
}

}  // namespace fitgrad::dist
