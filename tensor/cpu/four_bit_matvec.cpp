// The 4-bit matrix-vector product (see four_bit_matvec.h).
//
// Note [Four-bit matvec]
// A weight row W[o, :] of a quantized (out, in) tensor is in / blocksize whole blocks when
// in is a multiple of the blocksize (every model's layers are), so row o's dot product with
// x is sum over its blocks b of absmax_b * sum_{i in b} code(W_i) * x_i: the 16 code values
// sit in one vector register, and a vector of 16 nibbles becomes 16 code values in one
// permute (vpermps on AVX-512), with no f32 copy of W. Byte j of a 32-value chunk holds
// values 2j (high nibble) and 2j + 1, so x is staged once per call de-interleaved per chunk:
// its even positions, then its odd ones; the high nibbles then multiply the first half and
// the low nibbles the second. Each block's sum is in f32, scaled by its absmax into a
// per-row f32 vector that is reduced once at the end, so results differ from dequantizing
// to f32 and multiplying only in the order of the f32 sums. When in is not a multiple of the
// blocksize, blocks straddle rows and a scalar loop takes every value's block from its
// flat index. The outputs split over OpenMP threads.
#include "tensor/cpu/four_bit_matvec.h"

#include <algorithm>
#include <cstring>

#include "tensor/cpu/vec.h"

namespace fitgrad::cpu {
namespace {

constexpr int64_t kChunk = 32;  // values per 16 packed bytes

using Bytes16 = uint8_t __attribute__((vector_size(16)));

[[gnu::always_inline]] inline Vec lookup(const Vec& table, const IVec& index) {
#if defined(__clang__)
  Vec v;
  for (int i = 0; i < kVecWidth; ++i) v[i] = table[index[i]];
  return v;
#else
  return __builtin_shuffle(table, index);
#endif
}

[[gnu::always_inline]] inline float sum_lanes(const Vec& v) {
  float s = 0.0f;
  for (int i = 0; i < kVecWidth; ++i) s += v[i];
  return s;
}

FITGRAD_SIMD_CLONES
void aligned_rows(const uint8_t* packed, const float* absmax, int64_t out, int64_t in,
                  int64_t blocksize, const float* table16, const float* staged, int64_t rows,
                  float* y) {
  const Vec table = load(table16);
  const int64_t blocks_per_row = in / blocksize, chunks_per_block = blocksize / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < out; ++o) {
    const uint8_t* p = packed + o * (in / 2);
    const float* a = absmax + o * blocks_per_row;
    for (int64_t r = 0; r < rows; ++r) {
      const float* xs = staged + r * in;
      Vec total = splat(0.0f);
      for (int64_t b = 0; b < blocks_per_row; ++b) {
        Vec acc = splat(0.0f);
        for (int64_t c = 0; c < chunks_per_block; ++c) {
          const int64_t k = b * blocksize + c * kChunk;  // the chunk's first value in the row
          Bytes16 bytes;
          std::memcpy(&bytes, p + k / 2, sizeof bytes);
          const IVec v = __builtin_convertvector(bytes, IVec);
          acc += lookup(table, v >> 4) * load(xs + k) + lookup(table, v & 15) * load(xs + k + 16);
        }
        total += acc * a[b];
      }
      y[r * out + o] = sum_lanes(total);
    }
  }
}

void straddling_rows(const uint8_t* packed, const float* absmax, int64_t out, int64_t in,
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
        s += table[c] * absmax[i / blocksize] * x[r * in + k];
      }
      y[r * out + o] = s;
    }
}

}  // namespace

void four_bit_matvec(const uint8_t* packed, const float* absmax, int64_t out, int64_t in,
                     int64_t blocksize, quant::FourBitType type, const float* x, int64_t rows,
                     float* staging, float* y) {
  const float* table = quant::four_bit_values(type).data();
  if (in % blocksize != 0) {
    straddling_rows(packed, absmax, out, in, blocksize, table, x, rows, y);
    return;
  }
  // Note [Four-bit matvec]: per 32-value chunk, the even positions then the odd ones.
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < in; k += kChunk)
      for (int64_t j = 0; j < kChunk / 2; ++j) {
        staging[r * in + k + j] = x[r * in + k + 2 * j];
        staging[r * in + k + kChunk / 2 + j] = x[r * in + k + 2 * j + 1];
      }
  aligned_rows(packed, absmax, out, in, blocksize, table, staging, rows, y);
}

}  // namespace fitgrad::cpu
