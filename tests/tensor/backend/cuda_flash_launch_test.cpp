// The launch arithmetic of the cuda attention kernels (tensor/backend/cuda_flash_launch.h),
// checked without a GPU against independent values: the path a call takes, shared memory
// within every targeted card's limit, the causal tiles a block visits against a brute-force
// count of the tile pairs that meet the visible triangle, grids and block numbering as
// bijections, the dK/dV blocks' walk of their group's query heads, no workspace as cuda's
// workspace rule says, and the tensor-core
// fragment algebra (Note [mma fragments]) by emulating ldmatrix and mma.sync as the PTX ISA
// defines them and comparing each product the kernels form with a plain matrix product.
#include "tensor/backend/cuda_flash_launch.h"

#include <gtest/gtest.h>

#include <array>
#include <set>
#include <utility>
#include <vector>

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/profile.h"

namespace fitgrad::testing {
namespace {

using backend::CudaFlashMmaConfig;
using backend::CudaFlashPath;
using backend::CudaFlashSimtConfig;

// ---- paths and shared memory ----

TEST(CudaFlashLaunch, PathTakesTensorCoresOnlyWhereTheyApply) {
  using enum CudaFlashPath;
  EXPECT_EQ(backend::cuda_flash_path(DType::bf16, 64, true, 8), mma);
  EXPECT_EQ(backend::cuda_flash_path(DType::f16, 128, true, 9), mma);
  EXPECT_EQ(backend::cuda_flash_path(DType::bf16, 8, true, 8), mma);
  EXPECT_EQ(backend::cuda_flash_path(DType::bf16, 72, true, 8), mma);
  EXPECT_EQ(backend::cuda_flash_path(DType::f32, 64, true, 9), simt);    // f32: plain FMA
  EXPECT_EQ(backend::cuda_flash_path(DType::bf16, 256, true, 9), simt);  // past 128
  EXPECT_EQ(backend::cuda_flash_path(DType::bf16, 68, true, 9), simt);   // not a multiple of 8
  EXPECT_EQ(backend::cuda_flash_path(DType::bf16, 64, false, 9), simt);  // misaligned operand
  EXPECT_EQ(backend::cuda_flash_path(DType::f16, 64, true, 7), simt);    // before sm_80
  EXPECT_EQ(backend::cuda_flash_mma_head_dim(8), 64);
  EXPECT_EQ(backend::cuda_flash_mma_head_dim(64), 64);
  EXPECT_EQ(backend::cuda_flash_mma_head_dim(72), 128);
  EXPECT_EQ(backend::cuda_flash_mma_head_dim(128), 128);
}

// The opt-in shared memory per block of the targeted cards, in bytes.
constexpr int64_t kSm90Smem = 227 * 1024, kSm80Smem = 163 * 1024, kSm86Smem = 99 * 1024;

TEST(CudaFlashLaunch, MmaSharedMemoryFitsEveryTargetedCard) {
  // (q + 2 stages of k and v) rows of d + 8 two-byte elements
  EXPECT_EQ(CudaFlashMmaConfig<64>::kForwardSmem, (64 + 4 * 64) * 72 * 2);
  EXPECT_EQ(CudaFlashMmaConfig<128>::kForwardSmem, (64 + 4 * 64) * 136 * 2);
  // dK/dV: k, v, 2 stages of q and dout, 2 stages of lse and delta
  EXPECT_EQ(CudaFlashMmaConfig<64>::kBackwardSmem, (2 * 64 + 4 * 64) * 72 * 2 + 4 * 64 * 4);
  EXPECT_EQ(CudaFlashMmaConfig<128>::kBackwardSmem, (2 * 64 + 4 * 32) * 136 * 2 + 4 * 32 * 4);
  // dQ: q, dout, 2 stages of k and v
  EXPECT_EQ(CudaFlashMmaConfig<64>::kDqSmem, (2 * 64 + 4 * 64) * 72 * 2);
  EXPECT_EQ(CudaFlashMmaConfig<128>::kDqSmem, (2 * 64 + 4 * 32) * 136 * 2);
  // a backward's bytes are its larger kernel's
  EXPECT_EQ(backend::cuda_flash_smem_bytes(CudaFlashPath::mma, 64, true),
            CudaFlashMmaConfig<64>::kBackwardSmem);
  EXPECT_EQ(backend::cuda_flash_smem_bytes(CudaFlashPath::mma, 128, true),
            CudaFlashMmaConfig<128>::kBackwardSmem);
  for (const int64_t d : {64, 128}) {
    for (const bool backward : {false, true}) {
      const int64_t bytes = backend::cuda_flash_smem_bytes(CudaFlashPath::mma, d, backward);
      EXPECT_LE(bytes, kSm90Smem) << d;
      EXPECT_LE(bytes, kSm80Smem) << d;
      EXPECT_LE(bytes, kSm86Smem) << d;  // RTX 30xx/40xx too
    }
  }
}

TEST(CudaFlashLaunch, SimtSharedMemory) {
  // forward: q (32, d), k (32, d + 1), v (32, d) floats
  EXPECT_EQ(backend::cuda_flash_simt_forward_smem(64), (32 * 64 + 32 * 65 + 32 * 64) * 4);
  // backward dK/dV: k, v (32, d + 1), q, dout (32, d), P, dS (32, 33), lse, delta (32)
  EXPECT_EQ(backend::cuda_flash_simt_backward_smem(64),
            (2 * 32 * 65 + 2 * 32 * 64 + 2 * 32 * 33 + 2 * 32) * 4);
  // backward dQ: q, dout (32, d), k, v (32, d + 1); less than dK/dV's
  EXPECT_EQ(backend::cuda_flash_simt_dq_smem(64), (2 * 32 * 64 + 2 * 32 * 65) * 4);
  for (const int64_t d : {1, 64, 256})
    EXPECT_EQ(backend::cuda_flash_smem_bytes(CudaFlashPath::simt, d, true),
              backend::cuda_flash_simt_backward_smem(d));
  for (const int64_t d : {64, 128, 256})
    for (const bool backward : {false, true}) {
      EXPECT_LE(backend::cuda_flash_smem_bytes(CudaFlashPath::simt, d, backward), kSm80Smem);
      EXPECT_LE(backend::cuda_flash_smem_bytes(CudaFlashPath::simt, d, backward), kSm90Smem);
    }
  for (const int64_t d : {64, 128})
    EXPECT_LE(backend::cuda_flash_smem_bytes(CudaFlashPath::simt, d, true), kSm86Smem);
  EXPECT_LE(backend::cuda_flash_smem_bytes(CudaFlashPath::simt, 256, false), kSm86Smem);
  // the one case the adapter refuses on a 99 KB card
  EXPECT_GT(backend::cuda_flash_smem_bytes(CudaFlashPath::simt, 256, true), kSm86Smem);
  EXPECT_EQ(backend::cuda_flash_simt_chunks(1), 1);
  EXPECT_EQ(backend::cuda_flash_simt_chunks(32), 1);
  EXPECT_EQ(backend::cuda_flash_simt_chunks(33), 2);
  EXPECT_EQ(backend::cuda_flash_simt_chunks(100), 4);
  EXPECT_EQ(backend::cuda_flash_simt_chunks(256), 8);
}

TEST(CudaFlashLaunch, TileShapes) {
  // 16 rows per warp on the mma path, a key per lane on the simt path
  EXPECT_EQ(CudaFlashMmaConfig<64>::kBr, 64);
  EXPECT_EQ(CudaFlashMmaConfig<128>::kThreads, 128);
  EXPECT_EQ(CudaFlashMmaConfig<128>::kBwdBc, 64);
  EXPECT_EQ(CudaFlashMmaConfig<64>::kDqBr, 64);
  EXPECT_EQ(CudaFlashMmaConfig<64>::kDqBc, 64);
  EXPECT_EQ(CudaFlashMmaConfig<128>::kDqBc, 32);
  EXPECT_EQ(CudaFlashSimtConfig::kBc, 32);
  EXPECT_EQ(CudaFlashSimtConfig::kKeysPerWarp * CudaFlashSimtConfig::kWarps,
            CudaFlashSimtConfig::kBc);
  EXPECT_EQ(backend::cuda_flash_query_tile(CudaFlashPath::mma, 128), 64);
  EXPECT_EQ(backend::cuda_flash_key_tile(CudaFlashPath::simt, 64), 32);
}

// ---- masked tiles ----

// Whether query i sees key j, by the rule written out (Note [Causal alignment], Note
// [Sliding-window attention]).
bool sees(int64_t t, int64_t s, const backend::AttentionMask& mask, int64_t i, int64_t j) {
  const int64_t position = i + s - t;
  if (!mask.causal) return true;
  return j <= position && (mask.window == 0 || j > position - mask.window);
}

// Whether some query of [q0, q0 + br) and key of [j0, j0 + bc) (clipped to t and s) is
// visible, by brute force.
bool tiles_meet(int64_t t, int64_t s, const backend::AttentionMask& mask, int64_t q0, int64_t br,
                int64_t j0, int64_t bc) {
  for (int64_t i = q0; i < std::min(q0 + br, t); ++i)
    for (int64_t j = j0; j < std::min(j0 + bc, s); ++j)
      if (sees(t, s, mask, i, j)) return true;
  return false;
}

struct TileCase {
  int64_t t, s;
};
constexpr TileCase kTileCases[] = {{1, 1},     {64, 64},   {100, 100}, {1000, 1000}, {17, 300},
                                   {300, 17},  {128, 512}, {512, 128}, {65, 129},    {129, 65},
                                   {256, 256}, {1, 1000},  {1000, 1}};
// No mask, causal, and causal windows narrower than a tile, off the tile grid, and wider
// than most sequences.
const backend::AttentionMask kMasks[] = {false,
                                         true,
                                         backend::AttentionMask::sliding(1),
                                         backend::AttentionMask::sliding(20),
                                         backend::AttentionMask::sliding(100),
                                         backend::AttentionMask::sliding(4096)};

// Key tiles of a range are consecutive, so "visited" is "inside [first, end)".
bool inside(const backend::CudaTileRange& r, int64_t tile) {
  return tile >= r.first && tile < r.end;
}
int64_t count(const backend::CudaTileRange& r) { return std::max<int64_t>(r.end - r.first, 0); }

TEST(CudaFlashLaunch, ForwardVisitsExactlyTheKeyTilesItsQueriesSee) {
  for (const auto& [br, bc] : {std::pair<int64_t, int64_t>{64, 64}, {32, 32}}) {
    for (const TileCase& c : kTileCases) {
      for (const backend::AttentionMask& mask : kMasks) {
        const int64_t q_tiles = backend::cuda_ceil_div(c.t, br),
                      k_tiles = backend::cuda_ceil_div(c.s, bc);
        int64_t visited = 0, meeting = 0;
        for (int64_t qt = 0; qt < q_tiles; ++qt) {
          const backend::CudaTileRange keys =
              backend::cuda_flash_key_tiles(c.t, c.s, mask, qt * br, br, bc);
          visited += count(keys);
          for (int64_t kt = 0; kt < k_tiles; ++kt) {
            const bool meet = tiles_meet(c.t, c.s, mask, qt * br, br, kt * bc, bc);
            meeting += meet;
            EXPECT_EQ(meet, inside(keys, kt)) << c.t << " " << c.s << " " << mask.causal << " "
                                              << mask.window << " " << qt << " " << kt;
          }
        }
        EXPECT_EQ(visited, meeting) << c.t << " " << c.s << " " << mask.window;
        if (!mask.causal) {
          EXPECT_EQ(visited, q_tiles * k_tiles);
        }
      }
    }
  }
}

TEST(CudaFlashLaunch, BackwardVisitsExactlyTheQueryTilesThatSeeItsKeys) {
  for (const auto& [br, bc] : {std::pair<int64_t, int64_t>{64, 64}, {32, 64}, {32, 32}}) {
    for (const TileCase& c : kTileCases) {
      for (const backend::AttentionMask& mask : kMasks) {
        const int64_t q_tiles = backend::cuda_ceil_div(c.t, br),
                      k_tiles = backend::cuda_ceil_div(c.s, bc);
        int64_t visited = 0, meeting = 0;
        for (int64_t kt = 0; kt < k_tiles; ++kt) {
          const backend::CudaTileRange queries =
              backend::cuda_flash_query_tiles(c.t, c.s, mask, kt * bc, bc, br);
          visited += count(queries);
          for (int64_t qt = 0; qt < q_tiles; ++qt) {
            const bool meet = tiles_meet(c.t, c.s, mask, qt * br, br, kt * bc, bc);
            meeting += meet;
            EXPECT_EQ(meet, inside(queries, qt)) << c.t << " " << c.s << " " << mask.causal << " "
                                                 << mask.window << " " << qt << " " << kt;
          }
        }
        EXPECT_EQ(visited, meeting) << c.t << " " << c.s << " " << mask.window;
      }
    }
  }
}

TEST(CudaFlashLaunch, ATileIsMaskedIffSomePairInItIsHidden) {
  for (const TileCase& c : kTileCases) {
    for (const backend::AttentionMask& mask : kMasks) {
      const int64_t br = 32, bc = 32;
      for (int64_t q0 = 0; q0 < c.t; q0 += br) {
        for (int64_t j0 = 0; j0 < c.s; j0 += bc) {
          bool hidden = j0 + bc > c.s;  // keys past s count as hidden
          for (int64_t i = q0; i < q0 + br; ++i)
            for (int64_t j = j0; j < std::min(j0 + bc, c.s); ++j) {
              const bool h = !sees(c.t, c.s, mask, i, j);
              if (i < c.t) {
                EXPECT_EQ(backend::cuda_flash_hidden(c.t, c.s, mask, i, j), h);
                hidden = hidden || h;
              }
            }
          // Rows past t may ask for masking that the real rows do not need; never the reverse.
          if (hidden) {
            EXPECT_TRUE(backend::cuda_flash_tile_masked(c.t, c.s, mask, q0, br, j0, bc))
                << c.t << " " << c.s << " " << mask.window << " " << q0 << " " << j0;
          }
          if (q0 + br <= c.t && !hidden) {
            EXPECT_FALSE(backend::cuda_flash_tile_masked(c.t, c.s, mask, q0, br, j0, bc));
          }
        }
      }
    }
  }
}

TEST(CudaFlashLaunch, ForwardAndBackwardVisitTheSamePairs) {
  // with equal tiles, the sum over query tiles of the key tiles visited equals the sum
  // over key tiles of the query tiles visited
  for (const TileCase& c : kTileCases) {
    for (const backend::AttentionMask& mask : kMasks) {
      const int64_t br = 64, bc = 64;
      int64_t forward = 0, backward = 0;
      for (int64_t qt = 0; qt < backend::cuda_ceil_div(c.t, br); ++qt)
        forward += count(backend::cuda_flash_key_tiles(c.t, c.s, mask, qt * br, br, bc));
      for (int64_t kt = 0; kt < backend::cuda_ceil_div(c.s, bc); ++kt)
        backward += count(backend::cuda_flash_query_tiles(c.t, c.s, mask, kt * bc, bc, br));
      EXPECT_EQ(forward, backward) << c.t << " " << c.s << " " << mask.window;
    }
  }
  // 1000 x 1000 causal in 64-tiles: the 16 x 16 tile grid's lower triangle with the diagonal
  int64_t forward = 0;
  for (int64_t qt = 0; qt < 16; ++qt)
    forward += count(backend::cuda_flash_key_tiles(1000, 1000, true, qt * 64, 64, 64));
  EXPECT_EQ(forward, 16 * 17 / 2);
  // with a window of 100 a query tile sees its own key tile and at most two before it
  forward = 0;
  for (int64_t qt = 0; qt < 16; ++qt)
    forward += count(backend::cuda_flash_key_tiles(1000, 1000, backend::AttentionMask::sliding(100),
                                                   qt * 64, 64, 64));
  EXPECT_EQ(forward, 1 + 2 + 14 * 3);
}

TEST(CudaFlashLaunch, NaiveRowsMatchTheCpuAlignment) {
  // query i sees keys j <= i + s - t (Note [Causal alignment]), the newest `window` of them
  const auto visible = [](int64_t t, int64_t s, const backend::AttentionMask& mask, int64_t i) {
    const backend::CudaTileRange r = backend::cuda_naive_visible(t, s, mask, i);
    return std::pair<int64_t, int64_t>{r.first, r.end};
  };
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(visible(100, 10, true, 89), P(0, 0));
  EXPECT_EQ(visible(100, 10, true, 90), P(0, 1));
  EXPECT_EQ(visible(100, 100, true, 0), P(0, 1));
  EXPECT_EQ(visible(100, 100, false, 0), P(0, 100));
  EXPECT_EQ(visible(100, 100, backend::AttentionMask::sliding(8), 50), P(43, 51));
  EXPECT_EQ(visible(1, 100, backend::AttentionMask::sliding(8), 0), P(92, 100));  // decoding
  EXPECT_EQ(visible(100, 100, backend::AttentionMask::sliding(8), 3), P(0, 4));
}

// ---- grids ----

TEST(CudaFlashLaunch, ForwardBlocksCoverEveryTileOnceHeavyFirst) {
  for (const bool causal : {false, true}) {
    const int64_t bh = 6, t = 300, br = 64, q_tiles = 5;
    const int64_t blocks = backend::cuda_flash_forward_blocks(bh, t, br);
    ASSERT_EQ(blocks, 30);
    std::set<std::pair<int64_t, int64_t>> seen;
    for (int64_t b = 0; b < blocks; ++b) {
      const backend::CudaFlashBlock blk = backend::cuda_flash_forward_block(b, bh, q_tiles, causal);
      ASSERT_GE(blk.bh, 0);
      ASSERT_LT(blk.bh, bh);
      ASSERT_GE(blk.tile, 0);
      ASSERT_LT(blk.tile, q_tiles);
      seen.insert({blk.bh, blk.tile});
      // the first bh blocks take the last (causal: most keys) or first query tile
      if (b < bh) {
        EXPECT_EQ(blk.tile, causal ? q_tiles - 1 : 0);
      }
    }
    EXPECT_EQ(int64_t(seen.size()), blocks);
  }
  // samples: (B Hq) x ceil(T / Br)
  EXPECT_EQ(backend::cuda_flash_forward_blocks(2 * 8, 1000, 64), 16 * 16);
  EXPECT_EQ(backend::cuda_flash_forward_blocks(1 * 32, 4096, 64), 32 * 64);
  EXPECT_EQ(backend::cuda_flash_forward_blocks(4, 1, 32), 4);
  EXPECT_EQ(backend::cuda_flash_forward_blocks(4, 0, 32), 0);
}

TEST(CudaFlashLaunch, BackwardBlocksCoverEveryKeyTileOnce) {
  const int64_t bkv = 4, s = 130, bc = 64;  // batch x kv heads
  const int64_t blocks = backend::cuda_flash_backward_blocks(bkv, s, bc);
  ASSERT_EQ(blocks, 12);
  std::set<std::pair<int64_t, int64_t>> seen;
  for (int64_t b = 0; b < blocks; ++b) {
    const backend::CudaFlashBlock blk = backend::cuda_flash_backward_block(b, bkv);
    ASSERT_LT(blk.bh, bkv);
    ASSERT_LT(blk.tile, 3);
    seen.insert({blk.bh, blk.tile});
  }
  EXPECT_EQ(int64_t(seen.size()), blocks);
  EXPECT_EQ(backend::cuda_flash_backward_blocks(2 * 32, 8192, 64), 64 * 128);
  EXPECT_EQ(backend::cuda_flash_backward_blocks(3, 0, 64), 0);
}

TEST(CudaFlashLaunch, GroupedHeadsReadTheirKvHead) {
  // hq 8 over hkv 2: heads 0-3 read kv head 0, 4-7 kv head 1, per batch
  for (int64_t b = 0; b < 3; ++b)
    for (int64_t h = 0; h < 8; ++h)
      EXPECT_EQ(backend::cuda_flash_kv_head(b * 8 + h, 8, 2), b * 2 + h / 4);
  for (int64_t bh = 0; bh < 12; ++bh) EXPECT_EQ(backend::cuda_flash_kv_head(bh, 4, 4), bh);
  for (int64_t bh = 0; bh < 12; ++bh) EXPECT_EQ(backend::cuda_flash_kv_head(bh, 4, 1), bh / 4);
}

TEST(CudaFlashLaunch, GroupHeadsCoverEveryQueryHeadOnce) {
  // a dK/dV block of kv batch-head bkv walks h = 0 .. group - 1; over all kv batch-heads
  // the walks meet every query batch-head once, each of which reads bkv
  for (const auto& [hq, hkv] : {std::pair<int64_t, int64_t>{8, 2}, {4, 4}, {4, 1}}) {
    const int64_t batch = 3, group = hq / hkv;
    std::set<int64_t> seen;
    for (int64_t bkv = 0; bkv < batch * hkv; ++bkv)
      for (int64_t h = 0; h < group; ++h) {
        const int64_t bh = backend::cuda_flash_group_head(bkv, hq, hkv, h);
        EXPECT_EQ(backend::cuda_flash_kv_head(bh, hq, hkv), bkv) << hq << " " << hkv;
        seen.insert(bh);
      }
    EXPECT_EQ(int64_t(seen.size()), batch * hq);
    EXPECT_EQ(*seen.begin(), 0);
    EXPECT_EQ(*seen.rbegin(), batch * hq - 1);
  }
}

TEST(CudaFlashLaunch, NoWorkspaceIsCudasRule) {
  // the deterministic backward sums in registers (Note [CUDA attention accumulation])
  const backend::TargetProfile card = backend::cuda_profile(132, 32 << 20);
  for (const backend::AttentionShape& x :
       {backend::AttentionShape{2, 8, 8, 100, 100, 64},
        backend::AttentionShape{2, 8, 2, 100, 37, 128}, backend::AttentionShape{1, 4, 1, 0, 5, 16},
        backend::AttentionShape{1, 4, 4, 7, 0, 16}}) {
    EXPECT_EQ(backend::flash_workspace_shape(card, x, true, DType::bf16), (Shape{1, 0}));
    EXPECT_EQ(backend::flash_workspace_shape(card, x, false, DType::f32), (Shape{1, 0}));
  }
  EXPECT_EQ(backend::cuda_flash_row_blocks(1), 1);
  EXPECT_EQ(backend::cuda_flash_row_blocks(8), 1);
  EXPECT_EQ(backend::cuda_flash_row_blocks(9), 2);
}

TEST(CudaFlashLaunch, NaiveGemmBlocksCoverEveryTileOnce) {
  const int64_t batch = 3, m = 40, n = 17;  // 3 x 3 x 2 tiles of 16
  const int64_t blocks = backend::cuda_naive_gemm_blocks(batch, m, n);
  ASSERT_EQ(blocks, 18);
  std::set<std::array<int64_t, 3>> seen;
  for (int64_t b = 0; b < blocks; ++b) {
    const backend::CudaNaiveBlock blk = backend::cuda_naive_gemm_block(b, m, n);
    ASSERT_LT(blk.batch, batch);
    ASSERT_LT(blk.row_tile, 3);
    ASSERT_LT(blk.col_tile, 2);
    seen.insert({blk.batch, blk.row_tile, blk.col_tile});
  }
  EXPECT_EQ(int64_t(seen.size()), blocks);
  EXPECT_EQ(backend::cuda_naive_gemm_blocks(5, 0, 16), 0);
}

// ---- the fragment algebra (Note [mma fragments]) ----

// The PTX ISA's fragment layouts of mma.m16n8k16 with 16-bit A and B and f32 C, written as
// the ISA states them, to check the header's against.
backend::CudaFragmentIndex ptx_a(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  const int row = (i < 2 || (i >= 4 && i < 6)) ? group : group + 8;
  const int col = tig * 2 + (i & 1) + (i >= 4 ? 8 : 0);
  return {row, col};
}
backend::CudaFragmentIndex ptx_b(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  return {tig * 2 + (i & 1) + (i >= 2 ? 8 : 0), group};
}
backend::CudaFragmentIndex ptx_c(int lane, int i) {
  const int group = lane >> 2, tig = lane % 4;
  return {i < 2 ? group : group + 8, tig * 2 + (i & 1)};
}

TEST(CudaFlashFragments, LayoutsAreThePtxIsas) {
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) {
      EXPECT_EQ(backend::cuda_mma_a_index(lane, i).row, ptx_a(lane, i).row);
      EXPECT_EQ(backend::cuda_mma_a_index(lane, i).col, ptx_a(lane, i).col);
    }
    for (int i = 0; i < 4; ++i) {
      EXPECT_EQ(backend::cuda_mma_b_index(lane, i).row, ptx_b(lane, i).row);
      EXPECT_EQ(backend::cuda_mma_b_index(lane, i).col, ptx_b(lane, i).col);
      EXPECT_EQ(backend::cuda_mma_c_index(lane, i).row, ptx_c(lane, i).row);
      EXPECT_EQ(backend::cuda_mma_c_index(lane, i).col, ptx_c(lane, i).col);
    }
  }
}

// A warp's registers: 32 lanes x N registers of two 16-bit elements (held as floats).
template <int N>
using Regs = std::array<std::array<std::array<float, 2>, N>, 32>;

// A row-major shared-memory matrix.
struct Smem {
  int rows, cols;
  std::vector<float> v;
  Smem(int r, int c) : rows(r), cols(c), v(size_t(r) * c) {}
  float& at(int r, int c) { return v[size_t(r) * cols + c]; }
  float at(int r, int c) const { return v[size_t(r) * cols + c]; }
};

Smem iota_matrix(int rows, int cols, int seed) {
  Smem m(rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m.at(r, c) = float((r * 7 + c * 3 + seed) % 11 - 5);
  return m;
}

// ldmatrix.x4 (.trans) as the PTX ISA defines it: lane 8 m + r gives the address of row r
// of matrix m (here a (row, col) of `s`, reading 8 consecutive columns); lane l receives in
// register m row l / 4, columns 2 (l % 4) and + 1 of matrix m (.trans: column l / 4, rows
// 2 (l % 4) and + 1).
Regs<4> ldmatrix_x4(const Smem& s, bool trans, int row0, int col0,
                    backend::CudaFragmentIndex (*pattern)(int)) {
  std::array<std::array<std::array<float, 8>, 8>, 4> mats{};
  for (int lane = 0; lane < 32; ++lane) {
    const backend::CudaFragmentIndex a = pattern(lane);
    for (int c = 0; c < 8; ++c) mats[lane / 8][lane % 8][c] = s.at(row0 + a.row, col0 + a.col + c);
  }
  Regs<4> out{};
  for (int lane = 0; lane < 32; ++lane)
    for (int m = 0; m < 4; ++m)
      for (int e = 0; e < 2; ++e)
        out[lane][m][e] =
            trans ? mats[m][2 * (lane % 4) + e][lane / 4] : mats[m][lane / 4][2 * (lane % 4) + e];
  return out;
}

// d = c + a b, fragments in the ISA's layouts.
void mma(std::array<std::array<float, 4>, 32>& c, const Regs<4>& a,
         const std::array<std::array<std::array<float, 2>, 2>, 32>& b) {
  float am[16][16] = {}, bm[16][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < 8; ++i) am[ptx_a(lane, i).row][ptx_a(lane, i).col] = a[lane][i / 2][i % 2];
    for (int i = 0; i < 4; ++i) bm[ptx_b(lane, i).row][ptx_b(lane, i).col] = b[lane][i / 2][i % 2];
  }
  for (int lane = 0; lane < 32; ++lane)
    for (int i = 0; i < 4; ++i) {
      const backend::CudaFragmentIndex x = ptx_c(lane, i);
      for (int k = 0; k < 16; ++k) c[lane][i] += am[x.row][k] * bm[k][x.col];
    }
}

// The B fragments of n-tiles 0 (registers 0, 1) or 1 (registers 2, 3) of an x4 load.
std::array<std::array<std::array<float, 2>, 2>, 32> b_tile(const Regs<4>& r, int tile) {
  std::array<std::array<std::array<float, 2>, 2>, 32> b{};
  for (int lane = 0; lane < 32; ++lane) b[lane] = {r[lane][2 * tile], r[lane][2 * tile + 1]};
  return b;
}

using CTile = std::array<std::array<float, 4>, 32>;  // a (16, 8) f32 C fragment

// The (16, n) product held in n / 8 C tiles, as a matrix.
Smem from_c(const std::vector<CTile>& tiles) {
  Smem m(16, int(tiles.size()) * 8);
  for (size_t nt = 0; nt < tiles.size(); ++nt)
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const backend::CudaFragmentIndex x = ptx_c(lane, i);
        m.at(x.row, int(nt) * 8 + x.col) = tiles[nt][size_t(lane)][size_t(i)];
      }
  return m;
}

// a (m, k) b (k, n) with b[k][n] = get_b(k, n).
template <class A, class B>
Smem product(int m, int n, int k, A get_a, B get_b) {
  Smem out(m, n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      for (int x = 0; x < k; ++x) out.at(i, j) += get_a(i, x) * get_b(x, j);
  return out;
}

void expect_equal(const Smem& got, const Smem& want) {
  ASSERT_EQ(got.rows, want.rows);
  ASSERT_EQ(got.cols, want.cols);
  for (int r = 0; r < got.rows; ++r)
    for (int c = 0; c < got.cols; ++c) EXPECT_EQ(got.at(r, c), want.at(r, c)) << r << ", " << c;
}

// S (16, 16) = Q K^T over a head dim of 32, as the forward forms it: Q's A fragments by
// pattern X, K's B fragments (stored (key, dim)) by pattern Y.
std::vector<CTile> scores(const Smem& q, const Smem& k) {
  std::vector<CTile> s(2);
  for (int kk = 0; kk < q.cols / 16; ++kk) {
    const Regs<4> a = ldmatrix_x4(q, false, 0, kk * 16, backend::cuda_ldmatrix_x);
    const Regs<4> b = ldmatrix_x4(k, false, 0, kk * 16, backend::cuda_ldmatrix_y);
    mma(s[0], a, b_tile(b, 0));
    mma(s[1], a, b_tile(b, 1));
  }
  return s;
}

TEST(CudaFlashFragments, ScoresAreQTimesKTransposed) {
  const Smem q = iota_matrix(16, 32, 1), k = iota_matrix(16, 32, 4);
  expect_equal(from_c(scores(q, k)), product(
                                         16, 16, 32, [&](int i, int x) { return q.at(i, x); },
                                         [&](int x, int j) { return k.at(j, x); }));
}

// The A fragment of k-block kk built from C tiles by cuda_mma_a_from_c.
Regs<4> a_from_c(const std::vector<CTile>& c, int kk) {
  Regs<4> a{};
  for (int lane = 0; lane < 32; ++lane)
    for (int r = 0; r < 4; ++r) {
      const backend::CudaAFromC src = backend::cuda_mma_a_from_c(r);
      a[lane][r] = {c[size_t(2 * kk + src.tile)][lane][2 * src.pair],
                    c[size_t(2 * kk + src.tile)][lane][2 * src.pair + 1]};
    }
  return a;
}

TEST(CudaFlashFragments, ScoresStayInRegistersForTheValueProduct) {
  // O (16, 16) = P V with P the C tiles of the scores and V (keys, dim) by pattern X .trans
  const Smem q = iota_matrix(16, 32, 2), k = iota_matrix(16, 32, 5), v = iota_matrix(16, 16, 3);
  const std::vector<CTile> p = scores(q, k);
  const Smem pm = from_c(p);
  std::vector<CTile> o(2);
  const Regs<4> a = a_from_c(p, 0);
  const Regs<4> b = ldmatrix_x4(v, true, 0, 0, backend::cuda_ldmatrix_x);
  mma(o[0], a, b_tile(b, 0));
  mma(o[1], a, b_tile(b, 1));
  expect_equal(from_c(o), product(
                              16, 16, 16, [&](int i, int x) { return pm.at(i, x); },
                              [&](int x, int j) { return v.at(x, j); }));
}

}  // namespace
}  // namespace fitgrad::testing
