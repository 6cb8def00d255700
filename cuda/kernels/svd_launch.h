// The launchers of svd_basis's two kernels on a card (cuda/kernels/svd.cu), around cuSOLVER's
// eigensolver (Note [GaLore's SVD on a card] in cuda/ops/svd_basis.cpp). Plain values,
// pointers and the stream, as in launch.h; each returns its launch's cudaError_t.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "cuda/kernels/launch.h"
#include "tensor/dtype.h"

namespace fitgrad::cuda {

// gram (d, d) f32 = A A^T with `left` (d = m, summed over n), else A^T A (d = n, summed over
// m), for a (m, n) contiguous in `dtype` (f32, bf16 or f16). Sets *nonfinite to 1 when a
// value of a is not finite (the caller zeroes it first).
cudaError_t launch_svd_gram(const void* a, DType dtype, int64_t m, int64_t n, bool left,
                            float* gram, int* nonfinite, cudaStream_t stream);

// The basis from syevd's eigenvectors: vectors (d, d) column-major, column c the eigenvector
// of the c-th smallest eigenvalue. Vector j < r is column d - 1 - j, its sign flipped so
// that its entry of largest magnitude (the first such) is positive (Note [Singular vector
// signs] in tensor/cpu/svd.h); out is (d, r) with `left`, else (r, d), in `dtype`.
cudaError_t launch_svd_pick_basis(const float* vectors, int64_t d, int64_t r, bool left, void* out,
                                  DType dtype, cudaStream_t stream);

}  // namespace fitgrad::cuda
