// The launchers of the CUDA kernels (cuda/kernels/*.cu): plain functions whose parameters
// are values, pointers and the stream, so that the adapters in cuda/ops/ (compiled as C++,
// where fitgrad's headers are) call them without the kernels seeing those headers (Note [No
// fmt in .cu files] in device.cuh). Each returns the launch's cudaError_t; a launcher over
// no elements launches nothing and returns cudaSuccess. Floating operands are named by
// their DType (f32, bf16 or f16) and read and written in it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "tensor/dtype.h"
#include "tensor/rope_params.h"

namespace fitgrad::cuda {

// ---- device error flags (cuda/error_flags.h) ----

// The ops whose kernels check their indices on the device (Note [Device error flags]).
enum class DeviceErrorOp : int {
  embedding,
  embedding_backward,
  embedding_4bit,
  cross_entropy,
  cross_entropy_backward,
  count
};
// One op's record in device memory: how many indices were out of range since the last
// check, and one of them. A kernel that finds one adds 1 to `bad`, stores it in `example`,
// and skips it (a zero row, or a row left out of the loss).
struct DeviceErrorRecord {
  unsigned long long bad;
  long long example;
};

// ---- strided operands (elementwise.cu) ----

inline constexpr int kMaxDims = 8;

// N operands (outputs first) over a collapsed shape of `dims` dims: each operand's element
// 0 and its strides in elements; a broadcast dim has stride 0.
template <int N>
struct StridedPack {
  int dims = 0;
  int64_t sizes[kMaxDims] = {};
  char* data[N] = {};
  int64_t strides[N][kMaxDims] = {};
};

// dst = convert(src) elementwise, any storage dtypes (tensor/convert.h's rules).
cudaError_t launch_copy(const StridedPack<2>& p, int64_t n, DType dst, DType src,
                        cudaStream_t stream);
// dst = the element whose storage bits are `bits` (the value already converted to dtype).
cudaError_t launch_fill(const StridedPack<1>& p, int64_t n, DType dtype, uint64_t bits,
                        cudaStream_t stream);

// The f32 elementwise ops, in tensor/cpu/elementwise.h's order and with its formulas.
enum class Elementwise : int {
  neg,
  exp,
  tanh,
  log,
  sqrt,
  rsqrt,
  pow,
  scale,
  add_scalar,
  gelu,
  silu,  // out, x
  add,
  sub,
  mul,
  div,
  gelu_backward,
  silu_backward,
  swiglu  // out, a, b
};
cudaError_t launch_unary(Elementwise op, const StridedPack<2>& p, int64_t n, float param,
                         cudaStream_t stream);
cudaError_t launch_binary(Elementwise op, const StridedPack<3>& p, int64_t n, cudaStream_t stream);
// Operands dgate, dup, dy, gate, up.
cudaError_t launch_swiglu_backward(const StridedPack<5>& p, int64_t n, cudaStream_t stream);

// ---- reductions (reduce.cu) ----

// A collapsed index space and its strides in elements (kept or reduced dims of a sum).
struct ReduceDims {
  int dims = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};

// out (kept) = the sum over `red` of a, divided by `divisor`, over `blocks` chunks (>= 1);
// partial holds blocks x outputs doubles when blocks > 1.
cudaError_t launch_sum(DType dtype, const void* a, const ReduceDims& kept, const ReduceDims& red,
                       int64_t blocks, double divisor, void* out, double* partial,
                       cudaStream_t stream);
cudaError_t launch_max(DType dtype, const void* a, const ReduceDims& kept, int64_t size,
                       int64_t stride, void* values, int64_t* indices, cudaStream_t stream);
// dx (zeroed) at each kept output's argmax gets dy; kept holds dx's strides.
cudaError_t launch_max_backward(DType dtype, const void* dy, const int64_t* indices,
                                const ReduceDims& kept, int64_t stride, void* dx,
                                cudaStream_t stream);

// ---- row kernels (rows.cu) ----

// Null w / b / dw / db are absent; the shapes are LayerNormArgs' and RmsNormArgs'.
cudaError_t launch_layer_norm(DType dtype, const void* x, const void* w, const void* b, void* y,
                              float* mean, float* rstd, int64_t rows, int64_t c, float eps,
                              cudaStream_t stream);
cudaError_t launch_rms_norm(DType dtype, const void* x, const void* w, void* y, float* rstd,
                            int64_t rows, int64_t c, float eps, cudaStream_t stream);
// Layer norm's backward, or RMS norm's when mean is null (then db is null too).
cudaError_t launch_norm_backward(DType dtype, const void* dy, const void* x, const void* w,
                                 const float* mean, const float* rstd, void* dx, float* dw,
                                 float* db, float* partials, int64_t partitions, int64_t rows,
                                 int64_t c, cudaStream_t stream);
// causal_t: backend::SoftmaxArgs'.
cudaError_t launch_softmax(DType dtype, const void* x, void* y, int64_t outer, int64_t n,
                           int64_t inner, bool log, int64_t causal_t, cudaStream_t stream);
cudaError_t launch_softmax_backward(DType dtype, const void* dy, const void* y, void* dx,
                                    int64_t outer, int64_t n, int64_t inner, bool log,
                                    cudaStream_t stream);
// lse (rows) of x (rows, V); stats[0] (device memory) += the rows' negative
// log-likelihood and stats[1] += the rows counted; when loss is not null, *loss = stats[0] /
// stats[1] (0 when no row counted). Then the gradient rows dx = g (softmax(x) -
// onehot(target)) with g = *dloss / stats[1] (0 when none counted), 0 when ignored; dx may
// be x. A target outside [0, v) that is not ignore_index is recorded in `errors` and its row
// skipped (backend::CrossEntropyArgs' Note).
cudaError_t launch_cross_entropy(const float* x, const int64_t* targets, float* lse, double* stats,
                                 float* loss, int64_t rows, int64_t v, int64_t ignore_index,
                                 DeviceErrorRecord* errors, cudaStream_t stream);
cudaError_t launch_cross_entropy_backward(const float* x, const float* lse, const int64_t* targets,
                                          int64_t rows, int64_t v, int64_t ignore_index,
                                          const float* dloss, const double* stats, float* dx,
                                          DeviceErrorRecord* errors, cudaStream_t stream);

// ---- embedding and rope (embedding_rope.cu) ----

// ids are i32 when ids_i32, else i64; an id outside [0, v) is recorded in `errors` and its
// row of out is zero.
cudaError_t launch_embedding(const void* weight, const void* ids, bool ids_i32, void* out,
                             int64_t n, int64_t v, int64_t row_bytes, DeviceErrorRecord* errors,
                             cudaStream_t stream);
// dw (V, C) = the deterministic scatter-add of dy (n, C) (Note [CUDA embedding backward]);
// pairs is the (n, 2) i64 workspace. An id outside [0, v) is recorded in `errors` and its
// row of dy left out.
cudaError_t launch_embedding_backward(DType dtype, const void* dy, const void* ids, bool ids_i32,
                                      void* dw, int64_t* pairs, int64_t n, int64_t v, int64_t c,
                                      DeviceErrorRecord* errors, cudaStream_t stream);
// Fills the (2, T, D/2) cos/sin table, then y = x rotated (inverse: back); with positions
// (B, T) i32, `heads` rows a batch row, position t of a row takes table row positions[b][t].
cudaError_t launch_rope(DType dtype, const void* x, float* table, void* y, int64_t bh, int64_t t,
                        int64_t d, int64_t position_offset, const RopeParams& rope, bool inverse,
                        const int32_t* positions, int64_t heads, cudaStream_t stream);

// ---- random (random.cu): draw offset + i of the Philox stream of `seed` for element i ----

cudaError_t launch_dropout(DType dtype, const void* x, void* y, int64_t n, double p, uint64_t seed,
                           uint64_t offset, cudaStream_t stream);
cudaError_t launch_uniform(DType dtype, void* out, int64_t n, float lo, float width, uint64_t seed,
                           uint64_t offset, cudaStream_t stream);
cudaError_t launch_normal(DType dtype, void* out, int64_t n, double std, uint64_t seed,
                          uint64_t offset, cudaStream_t stream);

}  // namespace fitgrad::cuda
