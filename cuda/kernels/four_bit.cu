// The cuda kernels of bitsandbytes' 4-bit blockwise quantization (four_bit_launch.h): NF4 /
// FP4 quantization and its double quantization of the absmaxes, dequantization, the rows of
// a 4-bit embedding, and the fused dequantize-GEMM of linear_4bit. The grids and tiles are
// tensor/backend/cuda_four_bit_launch.h's (Note [CUDA 4-bit launch shapes]).
//
// Note [4-bit bytes as the CPU's]
// The quantized bytes (packed codes, absmax, nested codes, absmax2, offset) equal
// tensor/quant/four_bit.cpp's bit for bit, because every f32 value is computed by the same
// operations in the same order, each rounded once:
//   - an absmax is the max of |x| from 0, which does not depend on the order (fmaxf drops a
//     NaN as the CPU's std::max(m, |x|) does), and r = 1 / absmax is an IEEE division;
//   - a code is cuda_nf4_code / cuda_fp4_code of x * r, with the CPU's thresholds, and an odd
//     n's missing last value is coded from 0 * r;
//   - double quantization's mean is the f64 sum in index order (one thread), divided in f64
//     and rounded to f32 once; the nested codes are cuda_dynamic_code((absmax - mean) * r2);
//   - a dequantized absmax is map[code] * absmax2 + offset with no fused multiply-add
//     (__fmul_rn, __fadd_rn: the CPU compiles four_bit.cpp without contraction), and a
//     dequantized value is one f32 product code * absmax rounded once to the output dtype.
// The tables are the CPU's (FourBitTables, filled from tensor/quant by the adapter), and the
// code rules are checked against tensor/quant's on the CPU
// (tests/tensor/backend/cuda_four_bit_launch_test.cpp).
#include "cuda/kernels/device.cuh"
#include "cuda/kernels/four_bit_launch.h"
#include "tensor/backend/cuda_four_bit_launch.h"

namespace fitgrad::cuda {
namespace {

using backend::kCudaWarp;
constexpr int64_t kNested = quant::kNestedBlocksize;

unsigned blocks_for(int64_t n) { return unsigned(backend::cuda_elementwise_blocks(n)); }
constexpr unsigned kThreads = backend::kCudaThreads;

// absmax = map[code] * absmax2 + offset, one rounding each (Note [4-bit bytes as the CPU's]).
__device__ __forceinline__ float nested_absmax(const float* map, uint8_t code, float absmax2,
                                               float offset) {
  return __fadd_rn(__fmul_rn(map[code], absmax2), offset);
}

// ---- quantize ----

// a (n) -> packed ((n + 1) / 2), absmax (blocks): one warp per quantization block (Note
// [CUDA 4-bit launch shapes]).
template <class E, bool kFp4>
__global__ void __launch_bounds__(kThreads)
    quantize_kernel(const E* a, int64_t n, int64_t blocksize,
                    const __grid_constant__ FourBitTables tables, uint8_t* packed, float* absmax) {
  const int lane = int(threadIdx.x % kCudaWarp);
  const int64_t warps = int64_t(gridDim.x) * (blockDim.x / kCudaWarp);
  const int64_t blocks = (n + blocksize - 1) / blocksize;
  // b is the same for the warp's 32 lanes, so every lane takes part in the shuffles.
  for (int64_t b = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / kCudaWarp; b < blocks;
       b += warps) {
    const int64_t begin = b * blocksize, end = min(n, begin + blocksize);
    float m = 0.0f;
    for (int64_t i = begin + lane; i < end; i += kCudaWarp) m = fmaxf(m, fabsf(to_f32(a[i])));
    m = warp_fmax(m);
    if (lane == 0) absmax[b] = m;
    const float r = __fdiv_rn(1.0f, m);
    const auto code = [&](float x) {
      if constexpr (kFp4)
        return backend::cuda_fp4_code(x * r);
      else
        return backend::cuda_nf4_code(tables.thresholds, x * r);
    };
    // blocksize is even, so a block owns whole bytes.
    for (int64_t i = begin + 2 * lane; i < end; i += 2 * kCudaWarp) {
      const float next = i + 1 < end ? to_f32(a[i + 1]) : 0.0f;
      packed[i / 2] = uint8_t((code(to_f32(a[i])) << 4) | code(next));
    }
  }
}

// absmax (blocks) -> offset (1), their mean, in one block: thread 0 adds the absmaxes in
// index order in f64.
__global__ void __launch_bounds__(kThreads)
    absmax_mean_kernel(const float* absmax, int64_t blocks, float* offset) {
  __shared__ float chunk[backend::kFourBitMeanChunk];
  double sum = 0.0;
  for (int64_t base = 0; base < blocks; base += backend::kFourBitMeanChunk) {
    const int count = int(min(int64_t(backend::kFourBitMeanChunk), blocks - base));
    for (int i = int(threadIdx.x); i < count; i += int(blockDim.x)) chunk[i] = absmax[base + i];
    __syncthreads();
    if (threadIdx.x == 0)
      for (int i = 0; i < count; ++i) sum = __dadd_rn(sum, double(chunk[i]));
    __syncthreads();
  }
  if (threadIdx.x == 0)
    *offset = blocks > 0 ? __double2float_rn(__ddiv_rn(sum, double(blocks))) : 0.0f;
}

// absmax (blocks), offset (1) -> nested (blocks), absmax2 (groups): one block per nested
// group of 256 absmaxes, a thread per absmax.
constexpr int kNestedThreads = backend::kFourBitNestedThreads;
__global__ void __launch_bounds__(kNestedThreads)
    quantize_absmax_kernel(const float* absmax, int64_t blocks, const float* offset,
                           const __grid_constant__ FourBitTables tables, uint8_t* nested,
                           float* absmax2) {
  static_assert(kNestedThreads == backend::kDynamicMapCodes);
  __shared__ float map[backend::kDynamicMapCodes];
  __shared__ float scratch[kNestedThreads / kCudaWarp];
  map[threadIdx.x] = tables.map[threadIdx.x];
  const float mean = *offset;
  const int64_t b = int64_t(blockIdx.x) * kNested + threadIdx.x;
  const float d = b < blocks ? absmax[b] - mean : 0.0f;
  // The max's barrier also publishes the map.
  const float m = block_max(fmaxf(0.0f, fabsf(d)), scratch);
  if (threadIdx.x == 0) absmax2[blockIdx.x] = m;
  const float r = __fdiv_rn(1.0f, m);
  if (b < blocks) nested[b] = backend::cuda_dynamic_code(map, d * r);
}

// ---- dequantize ----

// nested (blocks), absmax2 (groups), offset (1) -> absmax (blocks).
__global__ void __launch_bounds__(kThreads)
    dequantize_absmax_kernel(const uint8_t* nested, const float* absmax2, const float* offset,
                             int64_t blocks, const __grid_constant__ FourBitTables tables,
                             float* absmax) {
  __shared__ float map[backend::kDynamicMapCodes];
  for (int i = int(threadIdx.x); i < backend::kDynamicMapCodes; i += int(blockDim.x))
    map[i] = tables.map[i];
  __syncthreads();
  const float off = *offset;
  FG_GRID_STRIDE(b, blocks) absmax[b] = nested_absmax(map, nested[b], absmax2[b / kNested], off);
}

// Copies the 16 code values into shared memory (a lookup by nibble diverges across a warp,
// which constant memory serializes); the caller syncs.
__device__ __forceinline__ void load_codes(const FourBitTables& tables, float* codes) {
  if (threadIdx.x < backend::kFourBitCodes) codes[threadIdx.x] = tables.values[threadIdx.x];
}

// packed ((n + 1) / 2), absmax (blocks) -> out (n): a thread per packed byte k, values 2k
// and 2k + 1 (absent for an odd n's last byte).
template <class E>
__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const uint8_t* packed, const float* absmax, int64_t n, int64_t blocksize,
                      const __grid_constant__ FourBitTables tables, E* out) {
  __shared__ float codes[backend::kFourBitCodes];
  load_codes(tables, codes);
  __syncthreads();
  FG_GRID_STRIDE(k, (n + 1) / 2) {
    const int64_t i = 2 * k;
    const float a = absmax[i / blocksize];  // i + 1 is in the same block: blocksize is even
    const uint8_t byte = packed[k];
    out[i] = from_f32<E>(codes[byte >> 4] * a);
    if (i + 1 < n) out[i + 1] = from_f32<E>(codes[byte & 0x0F] * a);
  }
}

// ids (n_ids) -> out (n_ids, cols), rows of the (rows, cols) packed / absmax: a thread per
// output value. An id outside [0, rows) gives a zero row, recorded once (by its column 0).
template <class E, class Id>
__global__ void __launch_bounds__(kThreads)
    embedding_kernel(const uint8_t* packed, const float* absmax, int64_t rows, int64_t cols,
                     int64_t blocksize, const __grid_constant__ FourBitTables tables, const Id* ids,
                     int64_t n_ids, E* out, DeviceErrorRecord* errors) {
  __shared__ float codes[backend::kFourBitCodes];
  load_codes(tables, codes);
  __syncthreads();
  FG_GRID_STRIDE(j, n_ids * cols) {
    const int64_t id = int64_t(ids[j / cols]);
    if (id < 0 || id >= rows) {
      if (j % cols == 0) record_error(errors, id);
      out[j] = from_f32<E>(0.0f);
      continue;
    }
    const int64_t i = id * cols + j % cols;
    out[j] = from_f32<E>(codes[backend::cuda_nibble(packed[i / 2], i)] * absmax[i / blocksize]);
  }
}

// ---- linear_4bit (Note [4-bit linear tiles]) ----

constexpr int kBM = backend::kLinear4bitBM, kBN = backend::kLinear4bitBN,
              kBK = backend::kLinear4bitBK, kTM = backend::kLinear4bitTM,
              kTN = backend::kLinear4bitTN, kPad = backend::kLinear4bitPad,
              kLinearThreads = backend::kLinear4bitThreads;

struct LinearShared {
  float x[kBK][kBM + kPad];  // x's tile, transposed: (k, m)
  float w[kBK][kBN + kPad];  // W's tile, transposed: (k, row); codes (aligned) or code * absmax
  float scale[kBN];          // aligned: each tile row's absmax of the current block
  float codes[backend::kFourBitCodes];
  float map[backend::kDynamicMapCodes];  // double quantization's signed map
};
static_assert(sizeof(LinearShared) == size_t(backend::cuda_linear_4bit_shared_bytes()));

__device__ __forceinline__ float block_absmax(const FourBitAbsmax& a, const float* map,
                                              float offset, int64_t b) {
  if (a.absmax) return a.absmax[b];
  return nested_absmax(map, a.nested[b], a.absmax2[b / kNested], offset);
}

// x (m, cols) -> out (m, rows) = x W^T, W the (rows, cols) packed weight: one block per
// output tile (blockIdx.x along m, blockIdx.y along rows).
template <bool kAligned>
__global__ void __launch_bounds__(kLinearThreads)
    linear_kernel(const uint8_t* packed, const FourBitAbsmax am, int64_t rows, int64_t cols,
                  int64_t blocksize, const __grid_constant__ FourBitTables tables, const float* x,
                  int64_t m, float* out) {
  __shared__ __align__(16) LinearShared s;
  const int tid = int(threadIdx.x);
  const int tx = tid % (kBN / kTN), ty = tid / (kBN / kTN);
  const int64_t m0 = int64_t(blockIdx.x) * kBM, n0 = int64_t(blockIdx.y) * kBN;
  load_codes(tables, s.codes);
  if (am.nested)
    for (int i = tid; i < backend::kDynamicMapCodes; i += kLinearThreads) s.map[i] = tables.map[i];
  const float offset = am.nested ? *am.offset : 0.0f;
  __syncthreads();

  float acc[kTM][kTN] = {};    // aligned: the current block's sums of code * x
  float total[kTM][kTN] = {};  // aligned: the outputs, block by block
  for (int64_t k0 = 0; k0 < cols; k0 += kBK) {
    // The tiles, read along k (coalesced); zeros past m, rows and cols.
    for (int e = tid; e < kBM * kBK; e += kLinearThreads) {
      const int r = e / kBK, c = e % kBK;
      const int64_t gm = m0 + r, gk = k0 + c;
      s.x[c][r] = gm < m && gk < cols ? x[gm * cols + gk] : 0.0f;
    }
    for (int e = tid; e < kBN * kBK; e += kLinearThreads) {
      const int r = e / kBK, c = e % kBK;
      const int64_t go = n0 + r, gk = k0 + c;
      float w = 0.0f;
      if (go < rows && gk < cols) {
        const int64_t i = go * cols + gk;
        w = s.codes[backend::cuda_nibble(packed[i / 2], i)];
        if constexpr (!kAligned) w = __fmul_rn(w, block_absmax(am, s.map, offset, i / blocksize));
      }
      s.w[c][r] = w;
    }
    const bool block_ends = kAligned && backend::cuda_linear_4bit_block_ends(k0, blocksize);
    if (block_ends && tid < kBN) {
      const int64_t go = n0 + tid;
      s.scale[tid] = go < rows
                         ? block_absmax(am, s.map, offset,
                                        backend::cuda_linear_4bit_block(go, k0, cols, blocksize))
                         : 0.0f;
    }
    __syncthreads();

    for (int kk = 0; kk < kBK; ++kk) {
      const float4 xa = *reinterpret_cast<const float4*>(&s.x[kk][ty * kTM]);
      const float4 wb = *reinterpret_cast<const float4*>(&s.w[kk][tx * kTN]);
      const float xv[kTM] = {xa.x, xa.y, xa.z, xa.w}, wv[kTN] = {wb.x, wb.y, wb.z, wb.w};
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
          if constexpr (kAligned)
            acc[i][j] = fmaf(wv[j], xv[i], acc[i][j]);
          else
            acc[i][j] = __fadd_rn(acc[i][j], __fmul_rn(wv[j], xv[i]));
        }
    }
    if (block_ends) {
#pragma unroll
      for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
          total[i][j] = fmaf(acc[i][j], s.scale[tx * kTN + j], total[i][j]);
          acc[i][j] = 0.0f;
        }
    }
    __syncthreads();  // the tiles are rewritten next step
  }

#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int64_t gm = m0 + ty * kTM + i;
#pragma unroll
    for (int j = 0; j < kTN; ++j) {
      const int64_t go = n0 + tx * kTN + j;
      if (gm < m && go < rows) out[gm * rows + go] = kAligned ? total[i][j] : acc[i][j];
    }
  }
}

}  // namespace

cudaError_t launch_quantize_4bit(const void* a, DType dtype, int64_t n, int64_t blocksize, bool fp4,
                                 const FourBitTables& tables, uint8_t* packed, float* absmax,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned blocks = unsigned(backend::cuda_quantize_4bit_blocks(n, blocksize));
  const bool known = dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    const E* src = static_cast<const E*>(a);
    if (fp4)
      quantize_kernel<E, true>
          <<<blocks, kThreads, 0, stream>>>(src, n, blocksize, tables, packed, absmax);
    else
      quantize_kernel<E, false>
          <<<blocks, kThreads, 0, stream>>>(src, n, blocksize, tables, packed, absmax);
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_quantize_absmax(const float* absmax, int64_t blocks, const FourBitTables& tables,
                                   uint8_t* nested, float* absmax2, float* offset,
                                   cudaStream_t stream) {
  if (blocks == 0) return cudaSuccess;
  absmax_mean_kernel<<<1, kThreads, 0, stream>>>(absmax, blocks, offset);
  if (const cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  quantize_absmax_kernel<<<unsigned(backend::cuda_nested_groups(blocks)), kNestedThreads, 0,
                           stream>>>(absmax, blocks, offset, tables, nested, absmax2);
  return cudaGetLastError();
}

cudaError_t launch_dequantize_absmax(const uint8_t* nested, const float* absmax2,
                                     const float* offset, int64_t blocks,
                                     const FourBitTables& tables, float* absmax,
                                     cudaStream_t stream) {
  if (blocks == 0) return cudaSuccess;
  dequantize_absmax_kernel<<<blocks_for(blocks), kThreads, 0, stream>>>(nested, absmax2, offset,
                                                                        blocks, tables, absmax);
  return cudaGetLastError();
}

cudaError_t launch_dequantize_4bit(const uint8_t* packed, const float* absmax, int64_t n,
                                   int64_t blocksize, const FourBitTables& tables, void* out,
                                   DType dtype, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const unsigned blocks = unsigned(backend::cuda_dequantize_4bit_blocks(n));
  const bool known = dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    dequantize_kernel<E><<<blocks, kThreads, 0, stream>>>(packed, absmax, n, blocksize, tables,
                                                          static_cast<E*>(out));
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_embedding_4bit(const uint8_t* packed, const float* absmax, int64_t rows,
                                  int64_t cols, int64_t blocksize, const FourBitTables& tables,
                                  const void* ids, DType id_dtype, int64_t n_ids, void* out,
                                  DType dtype, DeviceErrorRecord* errors, cudaStream_t stream) {
  if (n_ids == 0 || cols == 0) return cudaSuccess;
  if (id_dtype != DType::i32 && id_dtype != DType::i64) return cudaErrorInvalidValue;
  const unsigned blocks = blocks_for(n_ids * cols);
  const bool known = dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    if (id_dtype == DType::i32)
      embedding_kernel<E, int32_t><<<blocks, kThreads, 0, stream>>>(
          packed, absmax, rows, cols, blocksize, tables, static_cast<const int32_t*>(ids), n_ids,
          static_cast<E*>(out), errors);
    else
      embedding_kernel<E, int64_t><<<blocks, kThreads, 0, stream>>>(
          packed, absmax, rows, cols, blocksize, tables, static_cast<const int64_t*>(ids), n_ids,
          static_cast<E*>(out), errors);
  });
  return known ? cudaGetLastError() : cudaErrorInvalidValue;
}

cudaError_t launch_linear_4bit(const uint8_t* packed, const FourBitAbsmax& absmax, int64_t rows,
                               int64_t cols, int64_t blocksize, const FourBitTables& tables,
                               const float* x, int64_t m, float* out, cudaStream_t stream) {
  if (m == 0 || rows == 0) return cudaSuccess;
  const backend::CudaGrid2 g = backend::cuda_linear_4bit_grid(m, rows);
  if (g.y > backend::kCudaMaxGridY) return cudaErrorInvalidConfiguration;
  const dim3 grid(unsigned(g.x), unsigned(g.y));
  if (backend::cuda_linear_4bit_aligned(cols, blocksize))
    linear_kernel<true><<<grid, kLinearThreads, 0, stream>>>(packed, absmax, rows, cols, blocksize,
                                                             tables, x, m, out);
  else
    linear_kernel<false><<<grid, kLinearThreads, 0, stream>>>(packed, absmax, rows, cols, blocksize,
                                                              tables, x, m, out);
  return cudaGetLastError();
}

}  // namespace fitgrad::cuda
