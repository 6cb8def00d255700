// The layout of APOLLO's kernel workspace (backend::ApolloArgs in kernel_args.h), as plain
// constexpr C++ that both the CPU kernel and the CUDA kernels (which cannot include
// kernel_args.h: Note [No fmt in .cu files]) read.
#pragma once

#include <cstdint>

namespace fitgrad::backend {

// Note [APOLLO's workspace]
// In doubles: the channels' sums of N^2 (each then replaced by its f32 scale s_c), their
// sums of R^2, one sum of (g s)^2 per row of the parameter, the tensor-wise scale, and the
// coefficient step / l. channels = rows when right, else cols.
struct ApolloWorkspace {
  int64_t update_sums = 0, low_sums = 0, row_sums = 0, scale = 0, coef = 0, doubles = 0;
};
constexpr ApolloWorkspace apollo_workspace(int64_t rows, int64_t cols, bool right) {
  const int64_t channels = right ? rows : cols;
  ApolloWorkspace w;
  w.low_sums = channels;
  w.row_sums = 2 * channels;
  w.scale = 2 * channels + rows;
  w.coef = w.scale + 1;
  w.doubles = w.coef + 1;
  return w;
}

}  // namespace fitgrad::backend
