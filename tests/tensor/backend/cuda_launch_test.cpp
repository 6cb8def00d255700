// The CUDA kernels' launch arithmetic (tensor/backend/cuda_launch.h, Note [CUDA launch
// shapes]), checked on the CPU: grids cover their work, the reduction chunks partition the
// reduced space, and the workspaces the CUDA rules size (cuda_rules.cpp, which memplan
// plans with) are exactly what the kernels index. No GPU is needed; these are the plain C++
// halves of cuda/kernels/*.cu (flash attention's are in cuda_flash_launch_test.cpp).
#include "tensor/backend/cuda_launch.h"

#include <gtest/gtest.h>

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/backend/profile.h"

namespace fitgrad::testing {
namespace {

using namespace backend;

TEST(CudaLaunch, AnElementwiseGridCoversItsElementsWithinTheBlockCap) {
  EXPECT_EQ(cuda_elementwise_blocks(0), 0);
  for (int64_t n : {1, 1023, 1024, 1025, 1 << 20, 7'000'001}) {
    const int64_t blocks = cuda_elementwise_blocks(n);
    EXPECT_GE(blocks, 1) << n;
    EXPECT_LE(blocks, kCudaMaxBlocks) << n;
    // One pass of the grid-stride loop, kCudaItemsPerThread elements a thread, covers n
    // unless the cap binds, and one block fewer would not.
    if (blocks < kCudaMaxBlocks) {
      EXPECT_GE(blocks * kCudaThreads * kCudaItemsPerThread, n) << n;
      EXPECT_LT((blocks - 1) * kCudaThreads * kCudaItemsPerThread, n) << n;
    }
  }
  EXPECT_EQ(cuda_elementwise_blocks(int64_t(1) << 40), kCudaMaxBlocks);
}

TEST(CudaLaunch, RowThreadsAreAWarpMultipleAndAboutOnePerFourElements) {
  EXPECT_EQ(cuda_row_threads(1), 32);
  EXPECT_EQ(cuda_row_threads(128), 32);
  EXPECT_EQ(cuda_row_threads(129), 64);
  EXPECT_EQ(cuda_row_threads(768), 256);
  EXPECT_EQ(cuda_row_threads(50257), 1024);
  for (int64_t n = 1; n < 6000; n += 37) {
    const int t = cuda_row_threads(n);
    EXPECT_EQ(t % 32, 0);
    EXPECT_EQ(t & (t - 1), 0) << "a power of two, for the block reductions";
    EXPECT_TRUE(t == 1024 || int64_t(t) * 4 >= n) << n;
    EXPECT_TRUE(t == 32 || int64_t(t / 2) * 4 < n) << n;
  }
}

// The chunks [b * ceil(r / blocks), ...) of a sum's reduced space: every element in exactly
// one chunk, in order.
TEST(CudaLaunch, ReductionChunksPartitionTheReducedSpace) {
  for (int64_t r : {1, 4095, 4096, 4097, 100'000, 1'000'003}) {
    const int64_t blocks = cuda_reduce_blocks(r, 132);
    ASSERT_GE(blocks, 1);
    const int64_t chunk = cuda_ceil_div(r, blocks);
    int64_t covered = 0;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t begin = b * chunk, end = std::min(r, begin + chunk);
      EXPECT_EQ(begin, std::min(covered, begin)) << "chunks in order";
      covered += std::max<int64_t>(0, end - begin);
    }
    EXPECT_EQ(covered, r) << r;
  }
  EXPECT_EQ(cuda_reduce_blocks(1'000'000, 132), 245);    // ceil(1e6 / 4096)
  EXPECT_EQ(cuda_reduce_blocks(100'000'000, 132), 264);  // 2 per SM
}

// The sum kernel reads its chunk count back from the workspace the rule sized (cuda/ops/
// reduce_rows.cpp): blocks x outputs doubles, none for one chunk.
TEST(CudaLaunch, TheSumWorkspaceHoldsOnePartialPerChunkAndOutput) {
  const TargetProfile h100 = cuda_profile(132, 32 << 20);
  for (int64_t outputs : {1, 7, 768, 50257})
    for (int64_t r : {10, 4096, 4097, 9000, 2'000'000}) {
      const int64_t doubles = sum_workspace_doubles(h100, {outputs}, {1}, {r});
      const int64_t blocks = cuda_reduce_blocks(r, 132);
      EXPECT_EQ(doubles, blocks > 1 ? blocks * outputs : 0) << outputs << " x " << r;
    }
  // A sum of squares keeps one double even for one block: the host reads its result there.
  EXPECT_EQ(sum_squares_workspace_doubles(h100, 10), 1);
  EXPECT_EQ(sum_squares_workspace_doubles(h100, 5'000'000), 264);
}

TEST(CudaLaunch, NormPartitionsSplitTheRowsIntoNonEmptyOrderedRanges) {
  for (int64_t rows : {1, 5, 263, 264, 265, 8192}) {
    const int64_t p = cuda_norm_partitions(rows, 132);
    EXPECT_EQ(p, std::min<int64_t>(rows, 264));
    EXPECT_EQ(norm_partitions(cuda_profile(132, 0), rows), p);
    int64_t next = 0;
    for (int64_t i = 0; i < p; ++i) {  // partition i owns [i rows / p, (i + 1) rows / p)
      EXPECT_EQ(i * rows / p, next);
      EXPECT_GT((i + 1) * rows / p, i * rows / p) << "partition " << i << " of " << rows;
      next = (i + 1) * rows / p;
    }
    EXPECT_EQ(next, rows);
  }
}

TEST(CudaLaunch, TheEmbeddingBackwardsSortFitsThePairsInEveryDtype) {
  const TargetProfile h100 = cuda_profile(132, 32 << 20);
  for (DType dtype : {DType::f32, DType::bf16, DType::f16})
    EXPECT_TRUE(embedding_backward_pairs(h100, dtype)) << dtype_name(dtype);
  EXPECT_FALSE(embedding_backward_pairs(cpu_profile(2, false), DType::f32));
  EXPECT_TRUE(embedding_backward_pairs(cpu_profile(2, false), DType::bf16));
  for (int64_t n = 1; n <= 70'000; n = n * 3 + 1) {
    const int64_t keys = cuda_bitonic_keys(n);
    EXPECT_GE(keys, n);
    EXPECT_EQ(keys & (keys - 1), 0);
    EXPECT_LE(keys, 2 * n) << "the (n, 2) i64 pairs hold the padded keys";
  }
}

// A build with the CUDA backend registers a cuda kernel for every op of the CPU table (the
// harness, tests/tensor/backend/backend_ops_test.cpp, runs them where a GPU is usable).
// Note [cuBLASLt alignment hints]: the hint is what every row of every matrix of the batch
// has, checked against the addresses themselves: the largest power of two up to 256
// dividing the start of each of the first rows of the first matrices.
TEST(CudaLaunch, ACublasAlignmentHintHoldsForEveryRowOfEveryMatrix) {
  auto brute = [](uint64_t base, int64_t ld, int64_t batch, int64_t stride, int64_t bytes) {
    uint32_t a = 256;
    for (int64_t i = 0; i < std::min<int64_t>(batch, 3); ++i)
      for (int64_t r = 0; r < 3; ++r) {
        const uint64_t addr = base + uint64_t((i * stride + r * ld) * bytes);
        while (a > 1 && addr % a != 0) a /= 2;
      }
    return a;
  };
  const uint64_t bases[] = {0x7f0000000000, 0x7f0000000010, 0x7f0000000004, 0x7f0000000002};
  const int64_t lds[] = {64, 768, 33, 50, 1};
  const int64_t strides[] = {0, 4096, 100, 63};
  for (uint64_t base : bases)
    for (int64_t ld : lds)
      for (int64_t batch : {1, 4})
        for (int64_t stride : strides)
          for (int64_t bytes : {2, 4}) {
            SCOPED_TRACE(::testing::Message()
                         << std::hex << base << std::dec << " ld " << ld << " batch " << batch
                         << " stride " << stride << " bytes " << bytes);
            EXPECT_EQ(cuda_operand_alignment(base, ld, batch, stride, bytes),
                      brute(base, ld, batch, stride, bytes));
          }
  // The case the base address alone got wrong: an odd bf16 leading dimension.
  EXPECT_EQ(cuda_operand_alignment(0x7f0000000000, 33, 1, 0, 2), 2u);
}

TEST(CudaLaunch, TheCudaTableHasEveryOp) {
#ifndef FITGRAD_HAVE_CUDA
  GTEST_SKIP() << "built without the CUDA backend";
#endif
  for (OpId op : all_ops()) EXPECT_TRUE(has_kernel(DeviceType::cuda, op)) << op_name(op);
}

}  // namespace
}  // namespace fitgrad::testing
