// The CUDA backend's workspace rules (Note [CUDA workspace rules] in tensor/backend/profile.h),
// registered with the kernel table as cuda's BackendRules. They are plain C++ so that a
// build without CUDA plans for a card, and they are the sizes the CUDA kernels take their
// workspaces by.
#include <algorithm>

#include "tensor/backend/cuda_launch.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"

namespace fitgrad::backend {
namespace {
namespace rules {

// Blocks of a reduction over n elements: one per kCudaReduceElements, at most 2 per SM.
int64_t reduce_blocks(const TargetProfile& p, int64_t n) {
  return cuda_reduce_blocks(n, p.threads);
}

// One row of no floats, forward and backward: the backward is deterministic, its dK/dV and
// dQ kernels each own the gradient rows they write and sum them in registers, so nothing is
// accumulated across blocks in an f32 workspace (Note [CUDA attention accumulation] in
// cuda/kernels/attention_flash_backward.cu).
Shape flash_workspace(const TargetProfile&, const AttentionShape&, bool, DType) { return {1, 0}; }

// The kernels read their operands in their dtype: nothing is staged.
int64_t naive_workspace_floats(const TargetProfile&, int64_t, int64_t, int64_t, int64_t, bool,
                               DType) {
  return 0;
}

// Every GEMM takes the profile's cuBLASLt workspace, whatever its dtype.
int64_t gemm_workspace_floats(const TargetProfile& p, DType, int64_t, int64_t, int64_t, bool) {
  return p.gemm_workspace_bytes / 4;
}

// One double per block and kept output when a reduction needs more than one block.
int64_t sum_workspace_doubles(const TargetProfile& p, const Shape& kept_shape, const Strides&,
                              const Shape& reduced_shape) {
  const int64_t blocks = reduce_blocks(p, numel(reduced_shape));
  return blocks > 1 ? blocks * numel(kept_shape) : 0;
}

// A partial per block, and at least the one double the host reads the result from.
int64_t sum_squares_workspace_doubles(const TargetProfile& p, int64_t n) {
  return std::max<int64_t>(1, reduce_blocks(p, n));
}

int64_t norm_partitions(const TargetProfile& p, int64_t rows) {
  return cuda_norm_partitions(rows, p.threads);
}

// The Gram matrix, eigenvalues, flags and syevd's planned work array (cuda_svd_layout).
int64_t svd_workspace_floats(const TargetProfile&, int64_t m, int64_t n, bool left) {
  return cuda_svd_layout(m, n, left).total;
}

}  // namespace rules
}  // namespace

void register_cuda_rules() {
  register_backend_rules(DeviceType::cuda,
                         {.flash_workspace = rules::flash_workspace,
                          .naive_workspace_floats = rules::naive_workspace_floats,
                          .bf16_gemm = true,
                          .gemm_workspace_floats = rules::gemm_workspace_floats,
                          .sum_workspace_doubles = rules::sum_workspace_doubles,
                          .sum_squares_workspace_doubles = rules::sum_squares_workspace_doubles,
                          .norm_partitions = rules::norm_partitions,
                          .svd_workspace_floats = rules::svd_workspace_floats,
                          .embedding_sorts_f32 = true});
}

}  // namespace fitgrad::backend
