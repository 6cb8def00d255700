// The CUDA 4-bit kernels' plain-C++ side (tensor/backend/cuda_four_bit_launch.h), checked on
// a machine without a GPU: the grids of quantize, the nested groups and dequantize against
// hand-counted values; linear_4bit's tiles, grid and shared memory (Note [4-bit linear
// tiles]), and its aligned path's claim that a K tile lies in one quantization block of each
// weight row; and the per-value rules the kernels apply (the nibble order, the NF4, FP4 and
// dynamic-map code rules) against tensor/quant's over a sweep of every 1024th f32 bit
// pattern (NaNs and infinities included) and every threshold, code and midpoint with its
// neighbouring floats, so the device codes the CPU's bytes.
#include "tensor/backend/cuda_four_bit_launch.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "tensor/quant/dynamic_map.h"
#include "tensor/quant/four_bit.h"

namespace fitgrad::backend {
namespace {

TEST(CudaFourBitLaunch, QuantizeGridIsAWarpPerBlock) {
  EXPECT_EQ(kFourBitWarpsPerBlock, 8);
  EXPECT_EQ(cuda_quantize_4bit_blocks(333, 64), 1);  // 6 quantization blocks
  EXPECT_EQ(cuda_quantize_4bit_blocks(512, 64), 1);  // 8: one warp each
  EXPECT_EQ(cuda_quantize_4bit_blocks(513, 64), 2);  // a 9th, partial
  EXPECT_EQ(cuda_quantize_4bit_blocks(1, 4096), 1);
  EXPECT_EQ(cuda_quantize_4bit_blocks(4096 * 8 * 100, 4096), 100);
  EXPECT_EQ(cuda_quantize_4bit_blocks(int64_t(1) << 40, 64), int64_t(1) << 16);  // capped
}

TEST(CudaFourBitLaunch, NestedGroupsAndDequantizeGrid) {
  EXPECT_EQ(kFourBitNestedThreads, 256);
  EXPECT_EQ(cuda_nested_groups(1), 1);
  EXPECT_EQ(cuda_nested_groups(256), 1);
  EXPECT_EQ(cuda_nested_groups(257), 2);
  EXPECT_EQ(cuda_nested_groups(110'000'000), 429'688);
  // A thread per packed byte, 1024 bytes per block.
  EXPECT_EQ(cuda_dequantize_4bit_blocks(333), 1);   // 167 bytes
  EXPECT_EQ(cuda_dequantize_4bit_blocks(2048), 1);  // 1024 bytes
  EXPECT_EQ(cuda_dequantize_4bit_blocks(2049), 2);  // 1025 bytes
  EXPECT_EQ(cuda_dequantize_4bit_blocks(int64_t(1) << 40), int64_t(1) << 16);
}

TEST(CudaFourBitLaunch, LinearTilesGridAndSharedMemory) {
  EXPECT_EQ(kLinear4bitThreads, 256);  // 16 x 16 threads of 4 x 4 outputs
  EXPECT_EQ(kLinear4bitBM * kLinear4bitBK / kLinear4bitThreads, 8);  // x values per thread
  EXPECT_EQ(kLinear4bitBN * kLinear4bitBK / kLinear4bitThreads, 8);  // W values per thread
  const auto grid = [](int64_t m, int64_t rows) {
    const CudaGrid2 g = cuda_linear_4bit_grid(m, rows);
    return std::vector<int64_t>{g.x, g.y};
  };
  EXPECT_EQ(grid(2, 9), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(grid(64, 64), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(grid(65, 129), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(grid(4096, 1536), (std::vector<int64_t>{64, 24}));  // SmolLM2's MLP, 4k tokens
  EXPECT_EQ(grid(1, 128256), (std::vector<int64_t>{1, 2004}));  // a Llama 3 vocabulary
  EXPECT_LE(cuda_linear_4bit_grid(1, 128256).y, kCudaMaxGridY);
  // x and W tiles of 32 x (64 + 4) floats, 64 absmaxes, 16 codes, the 256-value map.
  EXPECT_EQ(cuda_linear_4bit_shared_bytes(), 4 * (32 * 68 + 32 * 68 + 64 + 16 + 256));
  EXPECT_EQ(cuda_linear_4bit_shared_bytes(), 18752);
}

TEST(CudaFourBitLaunch, AlignedTilesLieInOneBlockOfEachRow) {
  EXPECT_TRUE(cuda_linear_4bit_aligned(576, 64));
  EXPECT_TRUE(cuda_linear_4bit_aligned(4096, 4096));
  EXPECT_FALSE(cuda_linear_4bit_aligned(96, 64));  // blocks straddle rows
  EXPECT_FALSE(cuda_linear_4bit_aligned(33, 32));
  for (const int64_t blocksize : std::vector<int64_t>{32, 64, 128, 256, 1024, 4096})
    for (const int64_t cols : std::vector<int64_t>{blocksize, 3 * blocksize, 8192})
      for (int64_t o = 0; o < 3; ++o)
        for (int64_t k0 = 0; k0 < cols; k0 += kLinear4bitBK) {
          const int64_t b = cuda_linear_4bit_block(o, k0, cols, blocksize);
          for (int64_t k = k0; k < k0 + kLinear4bitBK; ++k)
            ASSERT_EQ((o * cols + k) / blocksize, b) << blocksize << " " << cols << " " << k;
          // The tile is its block's last when the next value starts another block (or the
          // row ends).
          const int64_t next = o * cols + k0 + kLinear4bitBK;
          const bool ends = k0 + kLinear4bitBK == cols || next / blocksize != b;
          ASSERT_EQ(cuda_linear_4bit_block_ends(k0, blocksize), ends) << blocksize << " " << k0;
        }
}

TEST(CudaFourBitLaunch, NibblesFirstValueHigh) {
  for (int byte = 0; byte < 256; ++byte) {
    EXPECT_EQ(cuda_nibble(uint8_t(byte), 0), byte >> 4);
    EXPECT_EQ(cuda_nibble(uint8_t(byte), 7), byte & 0x0F);
    EXPECT_EQ(cuda_nibble(uint8_t(byte), 1000), byte >> 4);
  }
}

// Every 1024th f32 bit pattern (both signs, NaNs, infinities, subnormals), then the values
// given and their neighbouring floats.
std::vector<float> sweep(const std::vector<float>& around) {
  std::vector<float> xs;
  for (uint64_t bits = 0; bits < (uint64_t(1) << 32); bits += 1024)
    xs.push_back(std::bit_cast<float>(uint32_t(bits)));
  for (const float v : around)
    for (const float s : {v, -v}) {
      xs.push_back(s);
      xs.push_back(std::nextafter(s, INFINITY));
      xs.push_back(std::nextafter(s, -INFINITY));
    }
  for (const float v : {0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::denorm_min()})
    xs.push_back(v);
  return xs;
}

TEST(CudaFourBitLaunch, Nf4CodeIsTheCpus) {
  const auto& t = quant::nf4_thresholds();
  std::vector<float> around(t.begin(), t.end());
  around.insert(around.end(), quant::nf4_values().begin(), quant::nf4_values().end());
  for (const float x : sweep(around))
    ASSERT_EQ(cuda_nf4_code(t.data(), x), quant::nf4_code(x)) << x;
}

TEST(CudaFourBitLaunch, Fp4CodeIsTheCpus) {
  // fp4_code's literal thresholds, and the code values.
  std::vector<float> around = {0.29166667f, 0.583333f,   0.8333333f, 0.4166667f,
                               0.0859375f,  0.20833333f, 0.00260417f};
  around.insert(around.end(), quant::fp4_values().begin(), quant::fp4_values().end());
  for (const float x : sweep(around)) ASSERT_EQ(cuda_fp4_code(x), quant::fp4_code(x)) << x;
}

TEST(CudaFourBitLaunch, DynamicCodeIsTheCpusSearch) {
  const quant::CodeMap& map = quant::dynamic_map_signed();
  std::vector<float> around(map.begin(), map.end());
  for (size_t i = 0; i + 1 < map.size(); ++i) around.push_back((map[i] + map[i + 1]) * 0.5f);
  const quant::CodeSearch& search = quant::signed_search();
  for (const float x : sweep(around))
    ASSERT_EQ(cuda_dynamic_code(map.data(), x), search.code(x)) << x;
}

}  // namespace
}  // namespace fitgrad::backend
