// NF4 and FP4 (see four_bit.h).
#include "tensor/quant/four_bit.h"

#include <algorithm>
#include <cmath>
#include <type_traits>

#include "tensor/convert.h"
#include "tensor/cpu_isa.h"
#include "tensor/error.h"
#include "tensor/quant/dynamic_map.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define FITGRAD_FOUR_BIT_AVX512 1
#endif

namespace fitgrad::quant {
namespace {

// bitsandbytes' published NF4 values.
constexpr std::array<double, 16> kNf4 = {-1.0,
                                         -0.6961928009986877,
                                         -0.5250730514526367,
                                         -0.39491748809814453,
                                         -0.28444138169288635,
                                         -0.18477343022823334,
                                         -0.09105003625154495,
                                         0.0,
                                         0.07958029955625534,
                                         0.16093020141124725,
                                         0.24611230194568634,
                                         0.33791524171829224,
                                         0.44070982933044434,
                                         0.5626170039176941,
                                         0.7229568362236023,
                                         1.0};

// FP4 magnitudes by the low 3 bits, and the kernel's thresholds between them.
constexpr std::array<float, 8> kFp4Magnitude = {
    0.0f, 0.005208333333f, 0.66666667f, 1.0f, 0.33333333f, 0.5f, 0.16666667f, 0.25f};

// One block's values in f32, code * absmax: 32 at a time on AVX-512 (16 bytes widen to
// 16 int32, vpermps looks up the high and the low nibbles, and a two-source permute puts
// them back in value order), the same single f32 product as the scalar loop.
#if FITGRAD_FOUR_BIT_AVX512
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f"))) void block_f32_avx512(const uint8_t* bytes, int64_t count,
                                                         const float* table16, float a,
                                                         float* out) {
  const __m512 table = _mm512_loadu_ps(table16), scale = _mm512_set1_ps(a);
  const __m512i first = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  const __m512i second =
      _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
  for (int64_t i = 0; i < count; i += 32) {
    const __m512i v =
        _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes + i / 2)));
    const __m512 hi = _mm512_mul_ps(_mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table), scale);
    const __m512 lo = _mm512_mul_ps(_mm512_permutexvar_ps(v, table), scale);
    _mm512_storeu_ps(out + i, _mm512_permutex2var_ps(hi, first, lo));
    _mm512_storeu_ps(out + i + 16, _mm512_permutex2var_ps(hi, second, lo));
  }
}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

}  // namespace

const std::array<float, 16>& nf4_values() {
  static const std::array<float, 16> v = [] {
    std::array<float, 16> out{};
    for (size_t i = 0; i < 16; ++i) out[i] = float(kNf4[i]);
    return out;
  }();
  return v;
}

const std::array<float, 15>& nf4_thresholds() {
  static const std::array<float, 15> t = [] {
    std::array<float, 15> out{};
    const auto& v = nf4_values();
    for (size_t i = 0; i < 15; ++i) out[i] = float((double(v[i]) + double(v[i + 1])) / 2.0);
    return out;
  }();
  return t;
}

const std::array<float, 16>& fp4_values() {
  static const std::array<float, 16> v = [] {
    std::array<float, 16> out{};
    for (size_t i = 0; i < 16; ++i)
      out[i] = (1.0f - 2.0f * float((i & 8) >> 3)) * kFp4Magnitude[i & 7];
    return out;
  }();
  return v;
}

const std::array<float, 16>& four_bit_values(FourBitType type) {
  return type == FourBitType::nf4 ? nf4_values() : fp4_values();
}

uint8_t nf4_code(float x) {
  const auto& t = nf4_thresholds();
  int code = 0;
  for (size_t k = 0; k < 15; ++k) code += int(x > t[k]);  // NaN: 0
  return uint8_t(code);
}

uint8_t fp4_code(float x) {
  const int sign = x < 0 ? 8 : 0;
  const float y = std::fabs(x);
  int m;
  if (y > 0.29166667f)
    m = y > 0.583333f ? (y > 0.8333333f ? 3 : 2) : (y > 0.4166667f ? 5 : 4);
  else if (y > 0.0859375f)
    m = y > 0.20833333f ? 7 : 6;
  else
    m = y > 0.00260417f ? 1 : 0;
  return uint8_t(m + sign);
}

void check_four_bit_blocksize(int64_t blocksize, const char* what) {
  FG_CHECK(blocksize >= 32 && blocksize <= 4096 && (blocksize & (blocksize - 1)) == 0,
           "[{}] blocksize must be a power of two from 32 to 4096, got {}", what, blocksize);
}

template <class T>
void quantize_four_bit(const T* a, int64_t n, int64_t blocksize, FourBitType type, uint8_t* packed,
                       float* absmax) {
  check_four_bit_blocksize(blocksize, "quantize_4bit");
  const auto code = type == FourBitType::nf4 ? nf4_code : fp4_code;
  const int64_t blocks = blocks_of(n, blocksize);
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * blocksize, end = std::min(n, begin + blocksize);
    float m = 0.0f;
    for (int64_t i = begin; i < end; ++i) m = std::max(m, std::fabs(float(a[i])));
    absmax[b] = m;
    const float r = 1.0f / m;
    // Byte k holds values 2k (high nibble) and 2k + 1; blocksize is even, so a block owns
    // whole bytes, and an odd n's last low nibble codes a missing value read as 0.
    for (int64_t i = begin; i < end; i += 2) {
      const float next = i + 1 < end ? float(a[i + 1]) : 0.0f;
      packed[i / 2] = uint8_t((code(float(a[i]) * r) << 4) | code(next * r));
    }
  }
}

template <class T>
void dequantize_four_bit(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                         FourBitType type, T* out) {
  check_four_bit_blocksize(blocksize, "dequantize_4bit");
  const auto& v = four_bit_values(type);
  const int64_t blocks = blocks_of(n, blocksize);
#if FITGRAD_FOUR_BIT_AVX512
  const bool avx512 = cpu_isa_at_least(CpuIsa::avx512);
#endif
  // A block at a time (it owns whole bytes: blocksize is even), each byte's two values.
#pragma omp parallel for schedule(static)
  for (int64_t b = 0; b < blocks; ++b) {
    const float a = absmax[b];
    const int64_t begin = b * blocksize, end = std::min(n, begin + blocksize);
    int64_t i = begin;
#if FITGRAD_FOUR_BIT_AVX512
    if constexpr (std::is_same_v<T, float>) {
      if (avx512) {  // whole 32-value chunks (blocksize is a multiple of 32)
        const int64_t whole = (end - begin) / 32 * 32;
        block_f32_avx512(packed + begin / 2, whole, v.data(), a, out + begin);
        i += whole;
      }
    }
#endif
    for (; i + 1 < end; i += 2) {
      const uint8_t byte = packed[i / 2];
      out[i] = convert<T>(v[byte >> 4] * a);
      out[i + 1] = convert<T>(v[byte & 0x0F] * a);
    }
    if (i < end) out[i] = convert<T>(v[packed[i / 2] >> 4] * a);  // an odd n's last value
  }
}

template <class T, class Id>
void dequantize_four_bit_rows(const uint8_t* packed, const float* absmax, int64_t row_len,
                              int64_t blocksize, FourBitType type, const Id* ids, int64_t n_ids,
                              T* out) {
  check_four_bit_blocksize(blocksize, "dequantize_4bit_rows");
  const auto& v = four_bit_values(type);
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < n_ids; ++r)
    for (int64_t k = 0; k < row_len; ++k) {
      const int64_t i = int64_t(ids[r]) * row_len + k;
      const uint8_t byte = packed[i / 2];
      const uint8_t c = i % 2 == 0 ? byte >> 4 : byte & 0x0F;
      out[r * row_len + k] = convert<T>(v[c] * absmax[i / blocksize]);
    }
}

void quantize_absmax(const float* absmax, int64_t blocks, uint8_t* codes, float* absmax2,
                     float* offset) {
  double sum = 0.0;
  for (int64_t b = 0; b < blocks; ++b) sum += double(absmax[b]);
  const float mean = blocks > 0 ? float(sum / double(blocks)) : 0.0f;
  *offset = mean;
  const CodeSearch& search = signed_search();
  for (int64_t g = 0; g < blocks_of(blocks, kNestedBlocksize); ++g) {
    const int64_t begin = g * kNestedBlocksize, end = std::min(blocks, begin + kNestedBlocksize);
    float m = 0.0f;
    for (int64_t b = begin; b < end; ++b) m = std::max(m, std::fabs(absmax[b] - mean));
    absmax2[g] = m;
    const float r = 1.0f / m;
    for (int64_t b = begin; b < end; ++b) codes[b] = search.code((absmax[b] - mean) * r);
  }
}

void dequantize_absmax(const uint8_t* codes, const float* absmax2, float offset, int64_t blocks,
                       float* absmax) {
  const CodeMap& map = dynamic_map_signed();
  for (int64_t b = 0; b < blocks; ++b)
    absmax[b] = map[codes[b]] * absmax2[b / kNestedBlocksize] + offset;
}

#define FITGRAD_FOUR_BIT(T)                                                                      \
  template void quantize_four_bit(const T*, int64_t, int64_t, FourBitType, uint8_t*, float*);    \
  template void dequantize_four_bit(const uint8_t*, const float*, int64_t, int64_t, FourBitType, \
                                    T*);                                                         \
  template void dequantize_four_bit_rows(const uint8_t*, const float*, int64_t, int64_t,         \
                                         FourBitType, const int32_t*, int64_t, T*);              \
  template void dequantize_four_bit_rows(const uint8_t*, const float*, int64_t, int64_t,         \
                                         FourBitType, const int64_t*, int64_t, T*);
FITGRAD_FOUR_BIT(float)
FITGRAD_FOUR_BIT(BFloat16)
FITGRAD_FOUR_BIT(Half)
#undef FITGRAD_FOUR_BIT

}  // namespace fitgrad::quant
