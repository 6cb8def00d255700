// The cuda kernels of embedding (a row gather and its deterministic scatter-add backward)
// and of rotary embeddings (the cos/sin table, the rotation and its inverse), with the CPU's
// arithmetic (tensor/cpu/embedding.cpp, rope.cpp).
//
// Note [CUDA embedding backward]
// Positions that share an id add into one row of dw, and the sum must not depend on timing.
// The (id, position) pairs are sorted as one 64-bit key each, id << 32 | position, by a
// bitonic sort in the (n, 2) i64 workspace (its 2n slots hold the next power of two >= n
// keys, padded with the largest key); then the first position of each run of one id sums
// the run's rows in f32, in position order, and rounds each element of dw once. That is
// the CPU's result bit for bit in every dtype: its f32 kernel adds each column's rows into
// a zeroed dw in position order (the same additions), and its bf16 / f16 kernel sorts the
// same way (Note [Low-precision embedding backward]). f32 sorts too on cuda (the rules'
// embedding_sorts_f32): a thread per column walking all n positions would leave most of
// the card idle.
#include <climits>

#include "cuda/kernels/device.cuh"
#include "cuda/kernels/launch.h"
#include "tensor/backend/cuda_launch.h"

namespace fitgrad::cuda {
namespace {

constexpr unsigned kThreads = backend::kCudaThreads;
unsigned grid_for(int64_t n) { return unsigned(backend::cuda_elementwise_blocks(n)); }

// An id outside [0, v) gives a zero row, recorded once (by its unit 0).
template <class U, class Id>
__global__ void gather_kernel(const U* weight, const Id* ids, U* out, int64_t n, int64_t v,
                              int64_t units, DeviceErrorRecord* errors) {
  FG_GRID_STRIDE(i, n * units) {
    const int64_t row = i / units, u = i % units;
    const int64_t id = int64_t(ids[row]);
    if (id < 0 || id >= v) {
      if (u == 0) record_error(errors, id);
      out[i] = U(0);
      continue;
    }
    out[i] = weight[id * units + u];
  }
}

// An id outside [0, v) is recorded and keyed as padding (LLONG_MAX), which sorts last and
// which run_sum_kernel skips.
template <class Id>
__global__ void make_keys_kernel(const Id* ids, int64_t* keys, int64_t n, int64_t v, int64_t padded,
                                 DeviceErrorRecord* errors) {
  FG_GRID_STRIDE(i, padded) {
    if (i >= n) {
      keys[i] = LLONG_MAX;
      continue;
    }
    const int64_t id = int64_t(ids[i]);
    if (id < 0 || id >= v) {
      record_error(errors, id);
      keys[i] = LLONG_MAX;
      continue;
    }
    keys[i] = (id << 32) | i;
  }
}

// One compare-exchange stage (k, j) of the bitonic sort of `padded` keys, ascending.
__global__ void bitonic_stage_kernel(int64_t* keys, int64_t padded, int64_t k, int64_t j) {
  FG_GRID_STRIDE(i, padded) {
    const int64_t l = i ^ j;
    if (l > i) {
      const bool ascending = (i & k) == 0;
      const int64_t a = keys[i], b = keys[l];
      if ((a > b) == ascending) {
        keys[i] = b;
        keys[l] = a;
      }
    }
  }
}

template <class E>
__global__ void zero_kernel(E* p, int64_t n) {
  FG_GRID_STRIDE(i, n) { p[i] = from_f32<E>(0.0f); }
}

// Thread (k, col): when key k starts a run of one id, the run's dy rows summed into dw.
template <class E>
__global__ void run_sum_kernel(const E* dy, const int64_t* keys, E* dw, int64_t n, int64_t c) {
  FG_GRID_STRIDE(i, n * c) {
    const int64_t k = i / c, col = i % c;
    if (keys[k] == LLONG_MAX) continue;  // an id out of range
    const int64_t id = keys[k] >> 32;
    if (k > 0 && (keys[k - 1] >> 32) == id) continue;
    float acc = 0.0f;
    for (int64_t r = k; r < n && (keys[r] >> 32) == id; ++r)
      acc += to_f32(dy[(keys[r] & 0xFFFFFFFFll) * c + col]);
    dw[id * c + col] = from_f32<E>(acc);
  }
}

__global__ void rope_table_kernel(float* table, int64_t t, int64_t d, int64_t position_offset,
                                  RopeParams rope) {
  const int64_t half = d / 2;
  FG_GRID_STRIDE(i, t * half) {
    const int64_t pos = i / half, k = i % half;
    const double inv_freq = rope_frequency(k, d, rope);  // Note [RoPE frequencies]
    const double angle = double(position_offset + pos) * inv_freq;
    const double scale = rope_attention_factor(rope);
    table[pos * half + k] = float(cos(angle) * scale);
    table[(t + pos) * half + k] = float(sin(angle) * scale);
  }
}

template <class E>
__global__ void rope_kernel(const E* x, const float* table, E* y, int64_t rows, int64_t t,
                            int64_t d, float sign, const int32_t* positions, int64_t heads) {
  const int64_t half = d / 2;
  FG_GRID_STRIDE(i, rows * half) {
    const int64_t r = i / half, k = i % half;
    const int64_t pos = positions ? positions[r / (heads * t) * t + r % t] : r % t;
    const float c = table[pos * half + k], s = sign * table[(t + pos) * half + k];
    const E* xr = x + r * d;
    E* yr = y + r * d;
    const float a = to_f32(xr[k]), b = to_f32(xr[k + half]);
    yr[k] = from_f32<E>(a * c - b * s);
    yr[k + half] = from_f32<E>(b * c + a * s);
  }
}

template <class Fn>
void with_ids(const void* ids, bool ids_i32, Fn&& fn) {
  if (ids_i32)
    fn(static_cast<const int32_t*>(ids));
  else
    fn(static_cast<const int64_t*>(ids));
}

}  // namespace

cudaError_t launch_embedding(const void* weight, const void* ids, bool ids_i32, void* out,
                             int64_t n, int64_t v, int64_t row_bytes, DeviceErrorRecord* errors,
                             cudaStream_t stream) {
  if (n == 0 || row_bytes == 0) return cudaSuccess;
  with_ids(ids, ids_i32, [&](const auto* id) {
    if (row_bytes % 4 == 0)
      gather_kernel<<<grid_for(n * row_bytes / 4), kThreads, 0, stream>>>(
          static_cast<const uint32_t*>(weight), id, static_cast<uint32_t*>(out), n, v,
          row_bytes / 4, errors);
    else
      gather_kernel<<<grid_for(n * row_bytes / 2), kThreads, 0, stream>>>(
          static_cast<const uint16_t*>(weight), id, static_cast<uint16_t*>(out), n, v,
          row_bytes / 2, errors);
  });
  return cudaGetLastError();
}

cudaError_t launch_embedding_backward(DType dtype, const void* dy, const void* ids, bool ids_i32,
                                      void* dw, int64_t* pairs, int64_t n, int64_t v, int64_t c,
                                      DeviceErrorRecord* errors, cudaStream_t stream) {
  if (v == 0 || c == 0) return cudaSuccess;
  const int64_t padded = backend::cuda_bitonic_keys(n);
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    zero_kernel<E><<<grid_for(v * c), kThreads, 0, stream>>>(static_cast<E*>(dw), v * c);
    if (n == 0) return;
    with_ids(ids, ids_i32, [&](const auto* id) {
      make_keys_kernel<<<grid_for(padded), kThreads, 0, stream>>>(id, pairs, n, v, padded, errors);
    });
    for (int64_t k = 2; k <= padded; k *= 2)
      for (int64_t j = k / 2; j > 0; j /= 2)
        bitonic_stage_kernel<<<grid_for(padded), kThreads, 0, stream>>>(pairs, padded, k, j);
    run_sum_kernel<E><<<grid_for(n * c), kThreads, 0, stream>>>(static_cast<const E*>(dy), pairs,
                                                                static_cast<E*>(dw), n, c);
  });
  return cudaGetLastError();
}

cudaError_t launch_rope(DType dtype, const void* x, float* table, void* y, int64_t bh, int64_t t,
                        int64_t d, int64_t position_offset, const RopeParams& rope, bool inverse,
                        const int32_t* positions, int64_t heads, cudaStream_t stream) {
  if (t == 0 || d < 2) return cudaSuccess;
  rope_table_kernel<<<grid_for(t * (d / 2)), kThreads, 0, stream>>>(table, t, d, position_offset,
                                                                    rope);
  dispatch_floating(dtype, [&](auto tag) {
    using E = typename decltype(tag)::type;
    rope_kernel<E><<<grid_for(bh * t * (d / 2)), kThreads, 0, stream>>>(
        static_cast<const E*>(x), table, static_cast<E*>(y), bh * t, t, d, inverse ? -1.0f : 1.0f,
        positions, heads);
  });
  return cudaGetLastError();
}

}  // namespace fitgrad::cuda
