// Front-end of the truncated SVD basis (GaLore's projection, optim/galore.h): the first r
// singular vectors of a matrix, written into a given tensor. It allocates only the
// backend's workspace (backend::svd_workspace_floats: none on a cpu, the Gram matrix and
// cuSOLVER's arrays on a card), so a dry run on meta plans it exactly (its kernel there does
// nothing); the cpu kernel is Eigen's SVD (tensor/cpu/svd.h), the cuda kernel cuSOLVER's
// eigensolver on the Gram matrix (Note [GaLore's SVD on a card] in cuda/ops/svd_basis.cpp).
#pragma once

#include "tensor/tensor.h"

namespace fitgrad::ops {

// a: (m, n), floating, contiguous. With `left`, out (m, r) gets U[:, :r]; else out (r, n)
// gets Vh[:r, :] (the right singular vectors as rows); 1 <= r <= min(m, n). out: floating
// (any of the three, rounded once from double), contiguous, on a's device. Signs as Note
// [Singular vector signs] (tensor/cpu/svd.h) fixes them. Throws when a has a non-finite value.
void svd_basis_(const Tensor& a, const Tensor& out, bool left);

}  // namespace fitgrad::ops
