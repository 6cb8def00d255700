// The 4-bit matrix-vector product (see four_bit_matvec.h).
//
// Note [Four-bit matvec]
// A weight row W[o, :] of a quantized (out, in) tensor is in / blocksize whole blocks when
// in is a multiple of the blocksize (every model's layers are), so row o's dot product with
// x is sum over its blocks b of absmax_b * sum_{i in b} code(W_i) * x_i: the 16 code values
// sit in one vector register and a vector of 16 nibbles becomes 16 code values in one
// permute (vpermps on AVX-512), with no f32 copy of W. x is staged once per call in the
// order the nibbles are read. Each block's sum is in f32, scaled by its absmax into a
// per-row f32 vector reduced once at the end, so results differ from dequantizing to f32
// and multiplying only in the order of the f32 sums. Three paths:
//   - blocksize 64 on AVX-512: Note [Nibbles in place];
//   - other blocksizes on AVX-512, and the portable vector code elsewhere: 16 packed bytes
//     (a 32-value chunk) widen to 16 int32; byte j holds values 2j (high nibble) and
//     2j + 1, so x is staged per chunk as its even positions, then its odd ones;
//   - in not a multiple of the blocksize (blocks straddle rows): a scalar loop that takes
//     every value's block from its flat index.
// The outputs split over OpenMP threads.
//
// Note [Nibbles in place]
// 64 packed bytes (two blocks of 64) are 16 dwords of 8 nibbles each. Shifting the dwords
// right by 0, 4, ..., 28 gives 8 index vectors, and vpermps reads only the low 4 bits of
// each index, so each shift is one lookup with no widening or masking of bytes. The index
// at (lane L, shift s) is byte 4L + s/8's low nibble (its second value) when s % 8 == 0,
// else its high nibble (its first value); x is staged in that order per 128-value group.
// Lanes 0-7 belong to the first block and 8-15 to the second, so the group's sum is scaled
// by a vector holding each lane's block absmax; a row with an odd number of blocks ends in
// a 32-byte half group whose upper lanes read index 0 against staged zeros.
#include "tensor/cpu/four_bit_matvec.h"

#include <algorithm>
#include <cstring>

#include "tensor/cpu/vec.h"
#include "tensor/cpu_isa.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FITGRAD_FOUR_BIT_AVX512 1
#endif

namespace fitgrad::cpu {
namespace {

constexpr int64_t kChunk = 32;  // values per 16 packed bytes

// W packed bytes as a vector, for a native vector of W floats.
template <int W>
struct PackedBytes;
template <>
struct PackedBytes<16> {
  using type = uint8_t __attribute__((vector_size(16)));
};
template <>
struct PackedBytes<8> {
  using type = uint8_t __attribute__((vector_size(8)));
};
template <>
struct PackedBytes<4> {
  using type = uint8_t __attribute__((vector_size(4)));
};

// table16[index] lane-wise, index in [0, 16): one permute of the table on AVX-512, a
// two-source permute of its halves on AVX2, element by element on SSE2 and under clang.
template <class V, class I>
[[gnu::always_inline]] inline V lookup(const float* table16, const I& index) {
#if !defined(__clang__)
  if constexpr (kLanes<V> == 16) {
    return __builtin_shuffle(load<V>(table16), index);
  } else if constexpr (kLanes<V> == 8) {
    return __builtin_shuffle(load<V>(table16), load<V>(table16 + 8), index);
  }
#endif
  V v;
  for (int i = 0; i < kLanes<V>; ++i) v[i] = table16[index[i]];
  return v;
}

// The kernels take a range of the outputs and no OpenMP: the parallel region
// (split_outputs) only calls them, since neither clang nor GCC compiles a region's outlined
// body for the target of the function around it (Note [Kernel ISA variants]).
constexpr int64_t kOutputsPerTask = 64;
template <class Fn>
void split_outputs(int64_t units, Fn&& fn) {
  const int64_t tasks = (units + kOutputsPerTask - 1) / kOutputsPerTask;
#pragma omp parallel for schedule(static)
  for (int64_t t = 0; t < tasks; ++t)
    fn(t * kOutputsPerTask, std::min(units, (t + 1) * kOutputsPerTask));
}

// y(rows, out) columns o_begin.. o_end of the aligned product, portable vector code.
template <CpuIsa kIsa>
[[gnu::always_inline]] inline void aligned_rows_vec_body(const uint8_t* packed,
                                                         const BlockAbsmax& absmax, int64_t out,
                                                         int64_t in, int64_t blocksize,
                                                         const float* table16, const float* staged,
                                                         int64_t rows, float* y, int64_t o_begin,
                                                         int64_t o_end) {
  // A chunk's 16 bytes are kParts native vectors; lane l of part h is the old 16-lane
  // vector's lane h W + l, so the sums below are the same 16 lane sums, added in lane order.
  using V = typename Native<kIsa>::F;
  using I = typename Native<kIsa>::I;
  constexpr int W = kLanes<V>, kParts = kVecWidth / W;
  const int64_t blocks_per_row = in / blocksize, chunks_per_block = blocksize / kChunk;
  for (int64_t o = o_begin; o < o_end; ++o) {
    const uint8_t* p = packed + o * (in / 2);
    const int64_t a = o * blocks_per_row;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xs = staged + r * in;
      V total[kParts];
      for (int h = 0; h < kParts; ++h) total[h] = splat<V>(0.0f);
      for (int64_t b = 0; b < blocks_per_row; ++b) {
        V acc[kParts];
        for (int h = 0; h < kParts; ++h) acc[h] = splat<V>(0.0f);
        for (int64_t c = 0; c < chunks_per_block; ++c) {
          const int64_t k = b * blocksize + c * kChunk;  // the chunk's first value in the row
#pragma GCC unroll 4
          for (int h = 0; h < kParts; ++h) {
            typename PackedBytes<W>::type bytes;
            std::memcpy(&bytes, p + k / 2 + h * W, sizeof bytes);
            const I v = __builtin_convertvector(bytes, I);
            acc[h] += lookup<V>(table16, v >> 4) * load<V>(xs + k + h * W) +
                      lookup<V>(table16, v & 15) * load<V>(xs + k + 16 + h * W);
          }
        }
        const float scale = absmax(a + b);
        for (int h = 0; h < kParts; ++h) total[h] += acc[h] * scale;
      }
      float sum = 0.0f;
      for (int h = 0; h < kParts; ++h)
        for (int i = 0; i < W; ++i) sum += total[h][i];
      y[r * out + o] = sum;
    }
  }
}

FITGRAD_ISA_KERNEL(void, aligned_rows_vec,
                   (const uint8_t* packed, const BlockAbsmax& absmax, int64_t out, int64_t in,
                    int64_t blocksize, const float* table16, const float* staged, int64_t rows,
                    float* y, int64_t o_begin, int64_t o_end),
                   (packed, absmax, out, in, blocksize, table16, staged, rows, y, o_begin, o_end))

#if FITGRAD_FOUR_BIT_AVX512
#if defined(__GNUC__) && !defined(__clang__)
// GCC 12 flags the intrinsics' own undefined-vector idiom (_mm512_undefined_epi32) at -O3.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
// aligned_rows in AVX-512 intrinsics: 16 bytes widen to 16 int32 in one vpmovzxbd (the
// portable vector code above assembles them lane by lane), and vpermps looks the codes up.
// R weight rows go at once, so that R independent chains of FMAs hide each one's latency.
// vpermps reads only the low 4 bits of each index, so the low nibble needs no mask.
template <int R>
__attribute__((target("avx512f"), always_inline)) inline void rows_avx512(
    const uint8_t* packed, const BlockAbsmax& absmax, int64_t o, int64_t in, int64_t blocksize,
    __m512 table, const float* xs, float* y) {
  const int64_t blocks_per_row = in / blocksize, chunks_per_block = blocksize / kChunk;
  __m512 total[R];
  for (int j = 0; j < R; ++j) total[j] = _mm512_setzero_ps();
  for (int64_t b = 0; b < blocks_per_row; ++b) {
    __m512 acc[R];
    for (int j = 0; j < R; ++j) acc[j] = _mm512_setzero_ps();
    for (int64_t c = 0; c < chunks_per_block; ++c) {
      const int64_t k = b * blocksize + c * kChunk;
      const __m512 xe = _mm512_loadu_ps(xs + k), xo = _mm512_loadu_ps(xs + k + 16);
      for (int j = 0; j < R; ++j) {
        const __m512i v = _mm512_cvtepu8_epi32(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(packed + (o + j) * (in / 2) + k / 2)));
        acc[j] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table), xe, acc[j]);
        acc[j] = _mm512_fmadd_ps(_mm512_permutexvar_ps(v, table), xo, acc[j]);
      }
    }
    for (int j = 0; j < R; ++j)
      total[j] =
          _mm512_fmadd_ps(acc[j], _mm512_set1_ps(absmax((o + j) * blocks_per_row + b)), total[j]);
  }
  for (int j = 0; j < R; ++j) y[o + j] = _mm512_reduce_add_ps(total[j]);
}

constexpr int kRows = 2;  // weight rows at a time: independent chains
__attribute__((target("avx512f"))) void aligned_rows_avx512(
    const uint8_t* packed, const BlockAbsmax& absmax, int64_t out, int64_t in, int64_t blocksize,
    const float* table16, const float* staged, int64_t rows, float* y, int64_t g_begin,
    int64_t g_end) {
  const __m512 table = _mm512_loadu_ps(table16);
  for (int64_t g = g_begin; g < g_end; ++g) {
    const int64_t o = g * kRows;
    for (int64_t r = 0; r < rows; ++r) {
      if (o + kRows <= out) {
        rows_avx512<kRows>(packed, absmax, o, in, blocksize, table, staged + r * in, y + r * out);
      } else {
        for (int64_t p = o; p < out; ++p)
          rows_avx512<1>(packed, absmax, p, in, blocksize, table, staged + r * in, y + r * out);
      }
    }
  }
}
// Blocks of 64 (the default): Note [Nibbles in place].
constexpr int64_t kGroup = 128;                      // values per 64 packed bytes
int64_t nibble_value(int64_t lane, int64_t shift) {  // the value a (lane, shift) index codes
  const int64_t byte = 4 * lane + shift / 8;
  return 2 * byte + (shift % 8 == 0 ? 1 : 0);  // bits 0-3: the second value of the byte
}

// One 64-byte group (or the 32-byte half group) of a row: its 128 (or 64) products with
// the staged x, each block's lanes scaled by its absmax, added to total.
__attribute__((target("avx512f"), always_inline)) inline __m512 group_avx512(
    const uint8_t* p, const BlockAbsmax& absmax, int64_t b, const float* xg, bool whole,
    __m512 table, __m512 total) {
  __m512i v;
  __m512 scale;
  if (whole) {
    v = _mm512_loadu_si512(p);
    scale = _mm512_mask_mov_ps(_mm512_set1_ps(absmax(b)), 0xFF00, _mm512_set1_ps(absmax(b + 1)));
  } else {
    v = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    scale = _mm512_set1_ps(absmax(b));
  }
  // Two chains: shifts 0, 8, 16, 24 into acc0, shifts 4, 12, 20, 28 into acc1.
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  for (int k = 0; k < 4; ++k) {
    const __m512i even = _mm512_srlv_epi32(v, _mm512_set1_epi32(8 * k));
    const __m512i odd = _mm512_srlv_epi32(v, _mm512_set1_epi32(8 * k + 4));
    acc0 = _mm512_fmadd_ps(_mm512_permutexvar_ps(even, table), _mm512_loadu_ps(xg + 32 * k), acc0);
    acc1 =
        _mm512_fmadd_ps(_mm512_permutexvar_ps(odd, table), _mm512_loadu_ps(xg + 32 * k + 16), acc1);
  }
  return _mm512_fmadd_ps(_mm512_add_ps(acc0, acc1), scale, total);
}

__attribute__((target("avx512f"))) void block64_rows_avx512(
    const uint8_t* packed, const BlockAbsmax& absmax, int64_t out, int64_t in, const float* table16,
    const float* staged, int64_t rows, float* y, int64_t pair_begin, int64_t pair_end) {
  const __m512 table = _mm512_loadu_ps(table16);
  const int64_t blocks_per_row = in / 64, groups = blocks_per_row / 2;
  const bool half = blocks_per_row % 2 == 1;
  const int64_t staged_row = (groups + (half ? 1 : 0)) * kGroup, row_bytes = in / 2;
  for (int64_t pr = pair_begin; pr < pair_end; ++pr) {  // two weight rows at a time
    const int64_t o = 2 * pr;
    const bool two = o + 1 < out;
    const uint8_t* p0 = packed + o * row_bytes;
    const uint8_t* p1 = two ? p0 + row_bytes : p0;
    const int64_t a0 = o * blocks_per_row, a1 = two ? a0 + blocks_per_row : a0;
    // The rows four pairs ahead, a cache line at a time, into L1.
    for (int64_t b = 0; b < 2 * row_bytes; b += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p0 + 8 * row_bytes + b), _MM_HINT_T0);
    for (int64_t r = 0; r < rows; ++r) {
      const float* xs = staged + r * staged_row;
      __m512 t0 = _mm512_setzero_ps(), t1 = _mm512_setzero_ps();
      for (int64_t g = 0; g < groups; ++g) {
        t0 = group_avx512(p0 + g * 64, absmax, a0 + 2 * g, xs + g * kGroup, true, table, t0);
        t1 = group_avx512(p1 + g * 64, absmax, a1 + 2 * g, xs + g * kGroup, true, table, t1);
      }
      if (half) {
        const int64_t g = groups;
        t0 = group_avx512(p0 + g * 64, absmax, a0 + 2 * g, xs + g * kGroup, false, table, t0);
        t1 = group_avx512(p1 + g * 64, absmax, a1 + 2 * g, xs + g * kGroup, false, table, t1);
      }
      y[r * out + o] = _mm512_reduce_add_ps(t0);  // a shuffle tree, not a 16-add chain
      if (two) y[r * out + o + 1] = _mm512_reduce_add_ps(t1);
    }
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

void straddling_rows(const uint8_t* packed, const BlockAbsmax& absmax, int64_t out, int64_t in,
                     int64_t blocksize, const float* table, const float* x, int64_t rows,
                     float* y) {
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o)
    for (int64_t r = 0; r < rows; ++r) {
      float s = 0.0f;
      for (int64_t k = 0; k < in; ++k) {
        const int64_t i = o * in + k;
        const uint8_t byte = packed[i / 2];
        const uint8_t c = i % 2 == 0 ? byte >> 4 : byte & 0x0F;
        s += table[c] * absmax(i / blocksize) * x[r * in + k];
      }
      y[r * out + o] = s;
    }
}

// Note [Four-bit matvec]: per 32-value chunk, the even positions then the odd ones.
void stage_chunks(const float* x, int64_t rows, int64_t in, float* staging) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < in; k += kChunk)
      for (int64_t j = 0; j < kChunk / 2; ++j) {
        staging[r * in + k + j] = x[r * in + k + 2 * j];
        staging[r * in + k + kChunk / 2 + j] = x[r * in + k + 2 * j + 1];
      }
}

}  // namespace

void four_bit_matvec(const uint8_t* packed, const BlockAbsmax& absmax, int64_t out, int64_t in,
                     int64_t blocksize, quant::FourBitType type, const float* x, int64_t rows,
                     float* staging, float* y) {
  const float* table = quant::four_bit_values(type).data();
  if (in % blocksize != 0) {
    straddling_rows(packed, absmax, out, in, blocksize, table, x, rows, y);
    return;
  }
#if FITGRAD_FOUR_BIT_AVX512
  if (cpu_isa_at_least(CpuIsa::avx512)) {
    if (blocksize == 64) {  // Note [Nibbles in place]: x staged per 128-value group
      const int64_t blocks = in / 64, staged_row = (blocks + 1) / 2 * kGroup;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t g = 0; g < staged_row / kGroup; ++g)
          for (int64_t shift = 0; shift < 32; shift += 4)
            for (int64_t lane = 0; lane < kVecWidth; ++lane) {
              const int64_t k = g * kGroup + nibble_value(lane, shift);
              staging[r * staged_row + g * kGroup + shift / 4 * kVecWidth + lane] =
                  k < in ? x[r * in + k] : 0.0f;
            }
      split_outputs((out + 1) / 2, [&](int64_t begin, int64_t end) {
        block64_rows_avx512(packed, absmax, out, in, table, staging, rows, y, begin, end);
      });
      return;
    }
    stage_chunks(x, rows, in, staging);
    split_outputs((out + kRows - 1) / kRows, [&](int64_t begin, int64_t end) {
      aligned_rows_avx512(packed, absmax, out, in, blocksize, table, staging, rows, y, begin, end);
    });
    return;
  }
#endif
  stage_chunks(x, rows, in, staging);
  split_outputs(out, [&](int64_t begin, int64_t end) {
    aligned_rows_vec(packed, absmax, out, in, blocksize, table, staging, rows, y, begin, end);
  });
}

}  // namespace fitgrad::cpu
