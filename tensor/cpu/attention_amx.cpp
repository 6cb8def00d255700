// AMX tiles for the bf16 flash attention forward (see attention_amx.h).
//
// Note [AMX attention tiles]
// On the f32 path a bf16 attention widens every q, k and v row it reads and multiplies in
// f32 on AVX-512 (Note [Staged attention tiles] in attention_flash.cpp): a quarter of
// `fitgrad eval --dtype bf16` on SmolLM2-135M at T = 512 (issue 45). AMX multiplies bf16
// tiles (16 rows of 32 bf16 against 16 pairs of rows of 16 bf16 pairs) into f32 tiles of
// 16 x 16, so here:
//   scores  s = q k^T: q's rows are the A tiles as they lie; k^T is the B operand, whose
//           rows hold pairs of adjacent d-values, so a key tile is packed once per pair of
//           tiles as (d / 2, 64) u32 words (a 32-bit transpose), zero past the tile's keys;
//   o += p v: the probabilities, rounded once to bf16 (as FlashAttention and PyTorch's CPU
//           flash kernel do for bf16), are the A tiles; v's rows are interleaved in pairs
//           ((64 / 2, d) u32 words) for the B operand, zero past the tile's keys (a 0 p
//           times an unread value must stay 0). o stays f32 in memory: its 16 x 16 tiles are
//           loaded, accumulated over the 64 keys and stored back, four at a time.
// The products are exact and summed in f32, so the scores equal the widened path's up to the
// order of the sums; o differs from it by p's rounding, within bf16's tolerance. The running
// max and sum of the softmax and every mask stay on the f32 path (attention_tile.h).
// Linux hands out AMX's 8 KB of tile state only to a process that asks (arch_prctl
// ARCH_REQ_XCOMP_PERM for XTILEDATA); it is asked once, and a refusal leaves the f32 path.
// The tile configuration is per thread and oneDNN's AMX kernels load their own, so each
// work item loads ours (amx_tiles_begin) and releases the tiles at its end.
#include "tensor/cpu/attention_amx.h"

#include <algorithm>

#include "tensor/cpu/attention_tile.h"
#include "tensor/cpu_isa.h"

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define FITGRAD_AMX_TILES 1
#endif

namespace fitgrad::cpu {

#ifdef FITGRAD_AMX_TILES
namespace {

#define FITGRAD_TARGET_AMX \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))

static_assert(kTileQ == 64 && kTileK == 64, "the tile loops below are written for 64 x 64");

constexpr int64_t kStrideS = kTileK * int64_t(sizeof(float));  // bytes per score row

bool tile_data_granted() {
  static const bool granted = [] {
    constexpr long kReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return granted;
}

int64_t round16(int64_t n) { return (n + 15) / 16 * 16; }

#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 flags the intrinsics' own undefined-vector idiom (_mm512_undefined_epi32) at -O3.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// dst rows 0..15 (stride dst_stride words) = the columns of the 16 x 16 words whose rows
// are r[0..15]: unpacks of 32- then 64-bit pairs within 128-bit lanes, then two rounds of
// lane shuffles.
FITGRAD_TARGET_AMX void transpose16(const __m512i (&r)[16], uint32_t* dst, int64_t dst_stride) {
  __m512i t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {  // u[i + j], lane L: column 4 L + j of rows i..i + 3
    u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
    const __m512i v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xDD);
    const __m512i w0 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
    const __m512i w1 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xDD);
    _mm512_storeu_si512(dst + j * dst_stride, _mm512_shuffle_i32x4(v0, w0, 0x88));
    _mm512_storeu_si512(dst + (4 + j) * dst_stride, _mm512_shuffle_i32x4(v1, w1, 0x88));
    _mm512_storeu_si512(dst + (8 + j) * dst_stride, _mm512_shuffle_i32x4(v0, w0, 0xDD));
    _mm512_storeu_si512(dst + (12 + j) * dst_stride, _mm512_shuffle_i32x4(v1, w1, 0xDD));
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

}  // namespace

bool amx_attention_usable(int64_t d) {
  return d > 0 && d % 32 == 0 && cpu_isa() >= CpuIsa::amx && tile_data_granted();
}

// The tile configuration: palette 1, tiles 0-7 all 16 rows of 64 bytes. A constant: GCC's
// _tile_loadconfig tells the compiler it reads 8 bytes, so the stores that fill a local
// configuration may be dropped (the tiles then stay unconfigured and the first tile
// instruction faults).
struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t bytes_per_row[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};
static_assert(sizeof(TileConfig) == 64);
constexpr TileConfig kTileConfig{};

FITGRAD_TARGET_AMX void amx_tiles_begin() { _tile_loadconfig(&kTileConfig); }

FITGRAD_TARGET_AMX void amx_tiles_end() { _tile_release(); }

FITGRAD_TARGET_AMX void amx_scores(int64_t nq, int64_t nk, int64_t d, float scale,
                                   const BFloat16* q, const BFloat16* k, uint32_t* kpack,
                                   float* s) {
  // kpack = k's (nk, d / 2) words transposed, 16 x 16 at a time, keys past nk zero.
  const int64_t pairs = d / 2;
  const auto* words = reinterpret_cast<const uint32_t*>(k);
  for (int64_t n0 = 0; n0 < kTileK; n0 += 16)
    for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
      __m512i r[16];
      for (int64_t i = 0; i < 16; ++i)
        r[i] = n0 + i < nk ? _mm512_loadu_si512(words + (n0 + i) * pairs + p0)
                           : _mm512_setzero_si512();
      transpose16(r, kpack + p0 * kTileK + n0, kTileK);
    }
  const int64_t q_stride = d * int64_t(sizeof(BFloat16));
  for (int64_t r0 = 0; r0 < nq; r0 += 16) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t x = 0; x < d; x += 32) {
      const uint32_t* b = kpack + (x / 2) * kTileK;
      _tile_loadd(4, q + r0 * d + x, q_stride);
      _tile_loadd(5, b, kStrideS);
      _tile_loadd(6, b + 16, kStrideS);
      _tile_dpbf16ps(0, 4, 5);
      _tile_loadd(7, b + 32, kStrideS);
      _tile_dpbf16ps(1, 4, 6);
      _tile_loadd(5, b + 48, kStrideS);
      _tile_dpbf16ps(2, 4, 7);
      _tile_dpbf16ps(3, 4, 5);
    }
    float* out = s + r0 * kTileK;
    _tile_stored(0, out, kStrideS);
    _tile_stored(1, out + 16, kStrideS);
    _tile_stored(2, out + 32, kStrideS);
    _tile_stored(3, out + 48, kStrideS);
  }
  const __m512 factor = _mm512_set1_ps(scale);
  for (int64_t i = 0; i < nq * kTileK; i += 16)
    _mm512_storeu_ps(s + i, _mm512_mul_ps(factor, _mm512_loadu_ps(s + i)));
}

FITGRAD_TARGET_AMX void amx_accumulate(int64_t nq, int64_t nk, int64_t d, const float* p,
                                       const BFloat16* v, uint32_t* vpack, BFloat16* pb, float* o) {
  const int64_t rows = round16(nq);
  // pb = bf16(p), 32 values at a time, rounded to nearest even; rows past nq zero.
  for (int64_t r = 0; r < nq; ++r)
    for (int64_t j = 0; j < kTileK; j += 32) {
      const __m512bh two = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(p + r * kTileK + j + 16),
                                               _mm512_loadu_ps(p + r * kTileK + j));
      _mm512_storeu_si512(pb + r * kTileK + j, (__m512i)two);
    }
  std::fill(pb + nq * kTileK, pb + rows * kTileK, BFloat16());
  // vpack(j / 2, x) = v(j, x) in the low half, v(j + 1, x) in the high half; 0 past nk.
  const auto* bits = reinterpret_cast<const uint16_t*>(v);
  for (int64_t j = 0; j < kTileK; j += 2) {
    uint32_t* row = vpack + (j / 2) * d;
    const uint16_t* lo = j < nk ? bits + j * d : nullptr;
    const uint16_t* hi = j + 1 < nk ? bits + (j + 1) * d : nullptr;
    for (int64_t x = 0; x < d; ++x)
      row[x] = uint32_t(lo ? lo[x] : 0) | uint32_t(hi ? hi[x] : 0) << 16;
  }
  const int64_t o_stride = d * int64_t(sizeof(float));
  const int64_t blocks = d / 16;
  for (int64_t r0 = 0; r0 < rows; r0 += 16)
    for (int64_t c0 = 0; c0 < blocks; c0 += 4) {
      const int64_t n = std::min<int64_t>(4, blocks - c0);
      float* out = o + r0 * d + c0 * 16;
      _tile_loadd(0, out, o_stride);
      _tile_loadd(1, out + 16, o_stride);
      if (n > 2) _tile_loadd(2, out + 32, o_stride);
      if (n > 3) _tile_loadd(3, out + 48, o_stride);
      for (int64_t j = 0; j < kTileK; j += 32) {
        const uint32_t* b = vpack + (j / 2) * d + c0 * 16;
        _tile_loadd(4, pb + r0 * kTileK + j, kTileK * int64_t(sizeof(BFloat16)));
        _tile_loadd(5, b, o_stride);
        _tile_loadd(6, b + 16, o_stride);
        _tile_dpbf16ps(0, 4, 5);
        _tile_dpbf16ps(1, 4, 6);
        if (n > 2) {
          _tile_loadd(7, b + 32, o_stride);
          _tile_dpbf16ps(2, 4, 7);
        }
        if (n > 3) {
          _tile_loadd(5, b + 48, o_stride);
          _tile_dpbf16ps(3, 4, 5);
        }
      }
      _tile_stored(0, out, o_stride);
      _tile_stored(1, out + 16, o_stride);
      if (n > 2) _tile_stored(2, out + 32, o_stride);
      if (n > 3) _tile_stored(3, out + 48, o_stride);
    }
}

#else

bool amx_attention_usable(int64_t) { return false; }
void amx_tiles_begin() {}
void amx_tiles_end() {}
void amx_scores(int64_t, int64_t, int64_t, float, const BFloat16*, const BFloat16*, uint32_t*,
                float*) {}
void amx_accumulate(int64_t, int64_t, int64_t, const float*, const BFloat16*, uint32_t*, BFloat16*,
                    float*) {}

#endif

}  // namespace fitgrad::cpu
