// The CUDA optimizer kernels' plain C++ halves (tensor/backend/cuda_optim_launch.h, Note [CUDA
// optimizer launch shapes]), checked on the CPU: Adam8bit's grid and its one thread per
// absmax-block element, sum of squares' partials within the workspace the CUDA rules size,
// Adafactor's column chunks and workspace layout within adafactor_workspace_doubles, APOLLO's
// workspace layout, and the 8-bit code search of the Adam8bit kernel against tensor/quant's
// CodeSearch, which the CPU kernel uses: the same code for every value, so the codes are
// byte-identical.
#include "tensor/backend/cuda_optim_launch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "tensor/backend/apollo_workspace.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/profile.h"
#include "tensor/quant/dynamic_map.h"

namespace fitgrad::testing {
namespace {

using namespace backend;

TEST(CudaOptimLaunch, Adam8bitRunsOneThreadPerElementOfAnAbsmaxBlock) {
  EXPECT_EQ(kCudaAdam8bitThreads, kAdam8bitBlock);
  EXPECT_EQ(cuda_adam8bit_blocks(0), 0);
  EXPECT_EQ(cuda_adam8bit_blocks(1), 1);
  EXPECT_EQ(cuda_adam8bit_blocks(256), 1);
  EXPECT_EQ(cuda_adam8bit_blocks(257), 2);
  EXPECT_EQ(cuda_adam8bit_blocks(768 * 768), 2304);
  EXPECT_EQ(cuda_adam8bit_blocks(4096 * 256), 4096);
  // A 7B model's MLP weight: 176,128 absmax blocks, strided over by the capped grid.
  EXPECT_EQ(cuda_adam8bit_blocks(int64_t(4096) * 11008), kCudaAdam8bitMaxBlocks);
  for (int64_t n = 1; n < 200'000; n += 997) {
    const int64_t absmaxes = (n + kAdam8bitBlock - 1) / kAdam8bitBlock;  // the front-end's
    const int64_t blocks = cuda_adam8bit_blocks(n);
    EXPECT_GE(blocks, 1) << n;
    EXPECT_LE(blocks, absmaxes) << n;  // no block without an absmax block
    EXPECT_EQ(blocks, std::min(absmaxes, kCudaAdam8bitMaxBlocks)) << n;
  }
}

TEST(CudaOptimLaunch, SumSquaresPartialsStayInsideTheWorkspace) {
  // Sized for the card it runs on: exactly the partials the CUDA rule sized.
  const TargetProfile h100 = cuda_profile(132, 32 << 20);
  for (int64_t n :
       {int64_t(1), int64_t(4096), int64_t(4097), int64_t(1'000'000), int64_t(1) << 30}) {
    const int64_t doubles = sum_squares_workspace_doubles(h100, n);
    EXPECT_EQ(cuda_sum_squares_blocks(n, 132, doubles), doubles) << n;
  }
  EXPECT_EQ(cuda_sum_squares_blocks(4096, 132, 1), 1);
  EXPECT_EQ(cuda_sum_squares_blocks(4097, 132, 2), 2);
  EXPECT_EQ(cuda_sum_squares_blocks(1'000'000, 132, 245), 245);         // ceil(1e6 / 4096)
  EXPECT_EQ(cuda_sum_squares_blocks(int64_t(1) << 30, 132, 264), 264);  // 2 per SM
  // A card with more SMs than the profile the front-end sized for: never past the workspace.
  EXPECT_EQ(cuda_sum_squares_blocks(int64_t(1) << 30, 144, 264), 264);
  // One with fewer: fewer partials.
  EXPECT_EQ(cuda_sum_squares_blocks(int64_t(1) << 30, 108, 264), 216);
  EXPECT_EQ(cuda_sum_squares_blocks(0, 132, 1), 0);
}

TEST(CudaOptimLaunch, AdafactorColumnChunksSplitTallParameters) {
  EXPECT_EQ(cuda_adafactor_col_chunks(4096, 4096), 1);
  EXPECT_EQ(cuda_adafactor_col_chunks(768, 50257), 1);
  EXPECT_EQ(cuda_adafactor_col_chunks(50257, 768), 25);   // ceil(50257 / 2048)
  EXPECT_EQ(cuda_adafactor_col_chunks(100'000, 10), 49);  // ceil(100000 / 2048)
  EXPECT_EQ(cuda_adafactor_col_chunks(4096, 1024), 2);
  EXPECT_EQ(cuda_adafactor_col_chunks(20'000, 5000), 4);  // capped by rows / cols
  EXPECT_EQ(cuda_adafactor_col_chunks(5, 1), 1);
  EXPECT_EQ(cuda_adafactor_col_chunks(1, 70), 1);  // an unfactored (1, 1, n) view

  const CudaAdafactorLayout emb = cuda_adafactor_layout(1, 50257, 768);
  EXPECT_EQ(emb.lines, 50257);
  EXPECT_EQ(emb.chunk_rows, 2011);  // ceil(50257 / 25)
  EXPECT_EQ(emb.col_tiles, 25 * 24);
  EXPECT_EQ(emb.col_partials, 0);  // in the row slots: 25 x 768 of 50,257
  const CudaAdafactorLayout square = cuda_adafactor_layout(2, 64, 96);
  EXPECT_EQ(square.chunks, 1);
  EXPECT_EQ(square.col_tiles, 2 * 3);
  EXPECT_EQ(square.col_partials, 128);  // the second region, after the 2 x 64 row slots
  EXPECT_EQ(square.p_total, 128);
  EXPECT_EQ(square.u_total, 0);
  EXPECT_EQ(square.row_means, 128 + 192);
}

TEST(CudaOptimLaunch, AdafactorUsesOnlyItsWorkspaceAndNoSlotTwice) {
  const int64_t sizes[] = {1, 2, 7, 31, 32, 33, 100, 768, 2047, 2048, 2049, 4096, 6145, 50257};
  for (int64_t batch : {1, 3})
    for (int64_t rows : sizes)
      for (int64_t cols : sizes) {
        const CudaAdafactorLayout l = cuda_adafactor_layout(batch, rows, cols);
        const int64_t total = adafactor_workspace_doubles(batch, rows, cols);
        SCOPED_TRACE(::testing::Message() << batch << " x " << rows << " x " << cols);
        EXPECT_EQ(l.lines, batch * rows);
        EXPECT_GE(l.chunks, 1);
        EXPECT_GE(l.chunks * l.chunk_rows, rows);  // the chunks cover every row
        EXPECT_EQ(l.col_tiles, batch * l.chunks * ((cols + 31) / 32));
        // The (batch, chunks, cols) column partials: inside the row slots when chunked (free
        // once the row EMA has read them), else exactly the second region.
        const int64_t partials = batch * l.chunks * cols;
        if (l.chunks > 1) {
          EXPECT_EQ(l.col_partials, 0);
          EXPECT_LE(partials, l.lines);
        } else {
          EXPECT_EQ(l.col_partials, l.lines);
          EXPECT_EQ(l.col_partials + partials, l.row_means);
        }
        // The sum of p^2 waits outside the row slots (which then take the sums of u^2) and
        // before the row means; the sum of u^2 lands in the first row slot.
        EXPECT_GE(l.p_total, l.lines);
        EXPECT_LT(l.p_total, l.row_means);
        EXPECT_LT(l.u_total, l.lines);
        EXPECT_EQ(l.row_means + batch, total);
      }
  EXPECT_EQ(cuda_line_blocks(50257), 50257);
  EXPECT_EQ(cuda_line_blocks(int64_t(1) << 20), kCudaMaxBlocks);
}

// The Adam8bit kernel's search against the CPU's, on every code, every midpoint, the floats
// beside them, the ends and past them, and a million values over the map's decades.
TEST(CudaOptimLaunch, TheDeviceCodeSearchIsTheCpuCodeSearch) {
  for (bool is_signed : {true, false}) {
    const quant::CodeMap& m =
        is_signed ? quant::dynamic_map_signed() : quant::dynamic_map_unsigned();
    const quant::CodeSearch& search = is_signed ? quant::signed_search() : quant::unsigned_search();
    std::vector<float> xs = {std::nanf(""), INFINITY, -INFINITY, 0.0f,   -0.0f,  1.0f,
                             -1.0f,         2.0f,     -2.0f,     1e-30f, -1e-30f};
    for (size_t i = 0; i < 256; ++i) {
      xs.push_back(m[i]);
      if (i + 1 < 256) xs.push_back((m[i] + m[i + 1]) * 0.5f);
    }
    const size_t exact = xs.size();
    for (size_t i = 0; i < exact; ++i) {
      xs.push_back(std::nextafter(xs[i], INFINITY));
      xs.push_back(std::nextafter(xs[i], -INFINITY));
    }
    uint64_t state = 2024;
    for (int i = 0; i < 1'000'000; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const float u = float(state >> 40) * 0x1p-24f;  // [0, 1)
      xs.push_back((i % 2 ? -1.0f : 1.0f) * std::pow(10.0f, -7.0f * u));
    }
    int64_t mismatches = 0;
    for (float x : xs)
      if (cuda_dynamic_code(m.data(), x) != search.code(x) && ++mismatches <= 5)
        ADD_FAILURE() << (is_signed ? "signed" : "unsigned") << " map, x = " << x << ": device "
                      << int(cuda_dynamic_code(m.data(), x)) << ", cpu " << int(search.code(x));
    EXPECT_EQ(mismatches, 0);
  }
}

// Note [APOLLO's workspace]: the regions (one sum of N^2 and of R^2 per channel, one sum per
// row, the tensor-wise scale, the coefficient) tile [0, doubles) with no slot twice, for
// either projection side; the CPU kernel and the cuda kernels both read this layout.
TEST(CudaOptimLaunch, ApolloWorkspaceRegionsTileIt) {
  for (const auto& [rows, cols] :
       {std::pair<int64_t, int64_t>{1, 1}, {12, 6}, {5, 9}, {4096, 11008}})
    for (bool right : {true, false}) {
      const ApolloWorkspace w = apollo_workspace(rows, cols, right);
      const int64_t channels = right ? rows : cols;
      std::vector<int> used(size_t(w.doubles), 0);
      auto mark = [&](int64_t at, int64_t count) {
        for (int64_t i = at; i < at + count; ++i) ++used[size_t(i)];
      };
      mark(w.update_sums, channels);
      mark(w.low_sums, channels);
      mark(w.row_sums, rows);
      mark(w.scale, 1);
      mark(w.coef, 1);
      EXPECT_EQ(std::count(used.begin(), used.end(), 1), w.doubles) << rows << " x " << cols;
    }
}

}  // namespace
}  // namespace fitgrad::testing
