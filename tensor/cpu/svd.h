// The truncated SVD basis of a matrix, on the host: the first r left or right singular
// vectors, which GaLore projects its gradients on (optim/galore.h). The cpu kernel of
// svd_basis calls it on the tensor's bytes; the cuda kernel decomposes on the card (Note
// [GaLore's SVD on a card] in cuda/ops/svd_basis.cpp) with the same sign rule, so both
// backends give the same basis to float accuracy.
//
// Note [Singular vector signs]
// A singular vector is defined up to its sign, and LAPACK, Eigen and cuSOLVER choose
// differently. GaLore's update P (P^T G) does not care within one projection, but its Adam
// moments outlive a refresh of P (the reference keeps them), so a flipped vector flips the
// old first moment against the new gradients and changes the trajectory. fitgrad therefore
// fixes each vector's sign: its entry of largest magnitude (the first such on a tie) is
// positive. The result is a function of the matrix alone, whatever the SVD routine, and the
// NumPy/torch reference (tests/golden/gen_galore_golden.py) applies the same rule to
// torch.linalg.svd's vectors.
//
// The decomposition is Eigen's BDCSVD in double (divide and conquer, Eigen's fast SVD for
// large matrices), asked for only the side it returns. Its working memory is Eigen's heap,
// not the ledger's: a double copy of the matrix and the thin factors, about 8 (m n + m k +
// n k) bytes for k = min(m, n), for the length of one call every update_proj_gap steps.
#pragma once

#include <cstdint>

#include "tensor/dtype.h"

namespace fitgrad::cpu {

// a: (m, n) contiguous in a_dtype (floating). With `left`, out (m, r) = U[:, :r]; else out
// (r, n) = Vh[:r, :], the right singular vectors as rows; out contiguous in out_dtype
// (floating), each vector's sign as Note [Singular vector signs] says, r <= min(m, n).
// Throws fitgrad::Error "[svd_basis] ..." when a has a non-finite value.
void svd_basis(const void* a, DType a_dtype, int64_t m, int64_t n, int64_t r, bool left, void* out,
               DType out_dtype);

}  // namespace fitgrad::cpu
