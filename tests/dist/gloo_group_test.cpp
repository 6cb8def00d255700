// The Gloo process group (dist/gloo_group.h) with 2 and 3 ranks, one thread each, over
// loopback and a FileStore in a fresh directory: every collective against a sequential
// reference computed here, for several dtypes and sizes (odd ones that the world size does
// not divide). The inputs are small multiples of 1/4 (whole numbers for the integer dtypes),
// so every sum is exact in f32, bf16 and f16 whatever order the ring adds in, and the results
// are compared exactly.
#include "dist/gloo_group.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <functional>
#include <thread>
#include <vector>

#include "tensor/error.h"
#include "tensor/half.h"

namespace fitgrad::dist {
namespace {

namespace fs = std::filesystem;

// A fresh store directory per group, unique across processes and tests.
std::string fresh_store() {
  static std::atomic<int> counter{0};
  const fs::path dir = fs::temp_directory_path() / ("dp_gloo_test_" + std::to_string(::getpid()) +
                                                    "_" + std::to_string(counter++));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return "file:" + dir.string();
}

// Runs fn(group) on `world` ranks, one thread each; rethrows the first failure.
void run_ranks(int world, const std::function<void(ProcessGroup&)>& fn,
               std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  const std::string store = fresh_store();
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        auto group = make_gloo_group({r, world, store, "127.0.0.1", timeout, ""});
        fn(*group);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

// Rank r's value at i: a multiple of 1/4 in [-2, 2], exact in every float dtype.
double value(int rank, int64_t i) { return double((int64_t(rank + 1) * (i + 3)) % 17 - 8) / 4; }

// The same in whole numbers for the integer dtypes.
double val(DType dtype, int rank, int64_t i) {
  return is_floating(dtype) ? value(rank, i) : 4 * value(rank, i);
}

Tensor make(const std::vector<double>& v, DType dtype) {
  Tensor t = Tensor::empty({int64_t(v.size())}, dtype);
  for (size_t i = 0; i < v.size(); ++i) t.set({int64_t(i)}, v[i]);
  return t;
}

// What `x` becomes in `dtype` (the one rounding an avg makes).
double rounded(double x, DType dtype) {
  switch (dtype) {
    case DType::f32: return double(float(x));
    case DType::bf16: return double(bf16_bits_to_f32(f32_to_bf16_bits(float(x))));
    case DType::f16: return double(f16_bits_to_f32(f32_to_f16_bits(float(x))));
    default: return x;
  }
}

struct Case {
  DType dtype;
  int64_t n;
};
const std::vector<Case> kCases = {{DType::f32, 1},  {DType::f32, 7},     {DType::f32, 100003},
                                  {DType::bf16, 5}, {DType::bf16, 4099}, {DType::f16, 11},
                                  {DType::i32, 13}, {DType::i64, 2},     {DType::f32, 0}};

class GlooGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooGroupTest, AllReduceSumAndAvgEqualTheSequentialSum) {
  const int world = GetParam();
  run_ranks(world, [&](ProcessGroup& g) {
    for (const Case& c : kCases)
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::avg}) {
        if (op == ReduceOp::avg && !is_floating(c.dtype)) continue;
        std::vector<double> mine(size_t(c.n));
        for (int64_t i = 0; i < c.n; ++i) mine[size_t(i)] = val(c.dtype, g.rank(), i);
        Tensor t = make(mine, c.dtype);
        g.all_reduce(t, op);
        for (int64_t i = 0; i < c.n; ++i) {
          double sum = 0;
          for (int r = 0; r < world; ++r) sum += val(c.dtype, r, i);
          const double want =
              op == ReduceOp::sum ? sum : rounded(float(sum) / float(world), c.dtype);
          ASSERT_EQ(t.at({i}), want) << dtype_name(c.dtype) << " n=" << c.n << " i=" << i;
        }
      }
  });
}

TEST_P(GlooGroupTest, AsyncAllReducesFinishInAnyWaitOrder) {
  const int world = GetParam();
  run_ranks(world, [&](ProcessGroup& g) {
    std::vector<Tensor> ts;
    std::vector<std::shared_ptr<Work>> works;
    for (int k = 0; k < 4; ++k) {
      ts.push_back(Tensor::full({1000 + k}, double(g.rank() + k), DType::f32));
      works.push_back(g.all_reduce_async(ts.back(), ReduceOp::sum));
    }
    for (int k = 3; k >= 0; --k) works[size_t(k)]->wait();
    for (int k = 0; k < 4; ++k) {
      const double want = double(world * (world - 1) / 2 + world * k);
      EXPECT_EQ(ts[size_t(k)].at({999 + k}), want);
    }
  });
}

TEST_P(GlooGroupTest, ReduceScatterGivesEachRankItsShardOfTheSum) {
  const int world = GetParam();
  run_ranks(world, [&](ProcessGroup& g) {
    for (const Case& c : kCases) {
      std::vector<double> mine(size_t(c.n));
      for (int64_t i = 0; i < c.n; ++i) mine[size_t(i)] = val(c.dtype, g.rank(), i);
      const Shard s = shard_of(c.n, g.rank(), world);
      Tensor out = Tensor::empty({s.size}, c.dtype);
      g.reduce_scatter(make(mine, c.dtype), out, ReduceOp::sum);
      for (int64_t j = 0; j < s.size; ++j) {
        double sum = 0;
        for (int r = 0; r < world; ++r) sum += val(c.dtype, r, s.begin + j);
        ASSERT_EQ(out.at({j}), sum) << dtype_name(c.dtype) << " n=" << c.n;
      }
    }
  });
}

TEST_P(GlooGroupTest, AllGatherConcatenatesTheShardsInRankOrder) {
  const int world = GetParam();
  run_ranks(world, [&](ProcessGroup& g) {
    for (const Case& c : kCases) {
      const Shard s = shard_of(c.n, g.rank(), world);
      std::vector<double> shard(size_t(s.size));
      for (int64_t j = 0; j < s.size; ++j) shard[size_t(j)] = val(c.dtype, g.rank(), s.begin + j);
      Tensor out = Tensor::zeros({c.n}, c.dtype);
      g.all_gather(make(shard, c.dtype), out);
      for (int r = 0; r < world; ++r) {
        const Shard sr = shard_of(c.n, r, world);
        for (int64_t j = 0; j < sr.size; ++j)
          ASSERT_EQ(out.at({sr.begin + j}), val(c.dtype, r, sr.begin + j)) << dtype_name(c.dtype);
      }
    }
  });
}

TEST_P(GlooGroupTest, BroadcastCopiesTheRootsTensorAndBarrierReturns) {
  const int world = GetParam();
  run_ranks(world, [&](ProcessGroup& g) {
    const int root = world - 1;
    for (const Case& c : kCases) {
      std::vector<double> mine(size_t(c.n));
      for (int64_t i = 0; i < c.n; ++i) mine[size_t(i)] = val(c.dtype, g.rank(), i);
      Tensor t = make(mine, c.dtype);
      g.broadcast(t, root);
      for (int64_t i = 0; i < c.n; ++i) ASSERT_EQ(t.at({i}), val(c.dtype, root, i));
    }
    g.barrier();
  });
}

TEST_P(GlooGroupTest, BadArgumentsAreRefusedByName) {
  const int world = GetParam();
  run_ranks(world, [&](ProcessGroup& g) {
    Tensor u8 = Tensor::zeros({4}, DType::u8);
    EXPECT_THROW(g.all_reduce(u8, ReduceOp::sum), Error);
    Tensor i = Tensor::zeros({4}, DType::i32);
    EXPECT_THROW(g.all_reduce(i, ReduceOp::avg), Error);
    Tensor wrong = Tensor::zeros({5});
    EXPECT_THROW(g.reduce_scatter(Tensor::zeros({7}), wrong, ReduceOp::sum), Error);
    g.barrier();
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooGroupTest, ::testing::Values(2, 3));

TEST(ShardOf, CoversEveryElementOnceInRankOrder) {
  for (int64_t n : {0, 1, 2, 7, 100}) {
    for (int world : {1, 2, 3, 4}) {
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        const Shard s = shard_of(n, r, world);
        EXPECT_EQ(s.begin, next);
        EXPECT_GE(s.size, 0);
        EXPECT_LE(s.size, (n + world - 1) / world);
        next = s.begin + s.size;
      }
      EXPECT_EQ(next, n);
    }
  }
}

}  // namespace
}  // namespace fitgrad::dist
