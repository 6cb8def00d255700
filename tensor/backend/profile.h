// Target profiles (DESIGN.md, Ops): the facts about a backend that decide workspace sizes,
// such as a CPU's thread count. Front-ends size every workspace from the profile of the
// tensor's device through the pure functions below, so a dry run on `meta` can plan for
// another machine: meta uses the planning target set here, by default this machine's CPU.
//
// Note [Meta plans for a target]
// For one profile, meta makes exactly the real run's allocations, in order, with the same
// sizes, categories and labels: every allocation happens in a front-end before dispatch,
// and every size comes from these functions of (profile, shapes). A CPU with 2 threads and
// one with 16 differ only in the per-thread workspaces (flash attention's tiles, the norms'
// partial sums), so memplan for a 16-thread CPU on a 2-core machine is exact.
//
// Each function below asks the target's backend for its rule (BackendRules in
// kernel_table.h): the CPU's are registered with its kernels (tensor/cpu/kernels.cpp).
//
// Note [CUDA workspace rules]
// A CUDA target's rules are plain C++ (tensor/backend/cuda_rules.cpp), so that a build
// without CUDA plans for a card. They are the contract of the CUDA kernels (issue 15
// implements the kernels to them; their launch logic is tested against these functions):
//   - every GEMM takes a cuBLASLt workspace of the profile's gemm_workspace_bytes from the
//     caching allocator (temporary; NVIDIA recommends 32 MiB on Hopper, 4 MiB elsewhere);
//     operands are read in their dtype, so there is no staging;
//   - flash attention needs no workspace beyond o and the log-sum-exp (forward) and delta
//     (backward): the backward is deterministic, each gradient row summed in registers by
//     the one block that writes it, with no f32 accumulator (FlashAttention's deterministic
//     mode);
//   - naive attention reads its operands in their dtype: no workspace;
//   - a reduction of R elements per output runs one block per kCudaReduceElements
//     elements, at most 2 per multiprocessor, and keeps one double per block and output
//     when it needs more than one block; sum of squares likewise;
//   - a norm backward sums dw/db over min(rows, 2 x multiprocessors) partitions.
#pragma once

#include <cstdint>
#include <string>

#include "tensor/device.h"
#include "tensor/dtype.h"
#include "tensor/shape.h"

namespace fitgrad::backend {

struct AttentionShape;  // tensor/backend/kernel_args.h

struct TargetProfile {
  DeviceType backend = DeviceType::cpu;  // whose workspace rules apply
  // cpu: the OpenMP threads a kernel may use; cuda: the card's streaming multiprocessors.
  int threads = 1;
  bool bf16_gemm = false;            // its GEMM reads bf16 operands (no f32 staging)
  int64_t gemm_workspace_bytes = 0;  // cuda: every GEMM's cuBLASLt workspace
  bool operator==(const TargetProfile&) const = default;
};

// Elements per block of a CUDA reduction (Note [CUDA workspace rules]).
inline constexpr int64_t kCudaReduceElements = 4096;

// This machine's CPU: OpenMP's maximum thread count (1 without OpenMP), and a bf16 GEMM when
// the build has one (tensor/cpu/gemm_bf16.h).
TargetProfile host_cpu_profile();
// A CPU with `threads` threads (>= 1), with or without a bf16 GEMM.
TargetProfile cpu_profile(int threads, bool bf16_gemm);
// A card with `multiprocessors` SMs (>= 1) whose GEMMs take `gemm_workspace_bytes` (>= 0,
// a multiple of 4) of cuBLASLt workspace (Note [CUDA workspace rules]).
TargetProfile cuda_profile(int multiprocessors, int64_t gemm_workspace_bytes);
// "cpu (2 threads)", "cuda (132 SMs, 32.00 MiB GEMM workspace)".
std::string profile_name(const TargetProfile& profile);

// The profile a device's front-ends size workspaces with: the host CPU for cpu, the
// planning target for meta, and for cuda:N the card's, as the CUDA backend registers it.
TargetProfile profile_for(Device device);
// A backend's profile of its device `index` (cuda: the card's SMs and its cuBLASLt
// workspace), registered at static initialisation; the function may cache.
using DeviceProfileFn = TargetProfile (*)(int index);
void register_device_profile(DeviceType type, DeviceProfileFn fn);
// meta's planning target, until the scope ends (scopes nest; not thread-local: set it
// before a dry run, not during one).
class MetaTargetScope {
 public:
  explicit MetaTargetScope(const TargetProfile& target);
  ~MetaTargetScope();
  MetaTargetScope(const MetaTargetScope&) = delete;
  MetaTargetScope& operator=(const MetaTargetScope&) = delete;

 private:
  TargetProfile before_;
};

// ---- workspace sizes: pure functions of the profile and the shapes ----

// The threads a CPU's flash attention splits its tiles over; one workspace row each.
int attention_threads(const TargetProfile& profile);
// f32 elements of one thread's flash attention workspace for head dim d and operands of
// `dtype` (bf16/f16 add their staging tiles); cpu targets only.
int64_t flash_workspace_floats(const TargetProfile& profile, int64_t d, bool backward, DType dtype);
// The (rows, floats) f32 workspace of one flash attention call on any target: (threads,
// flash_workspace_floats) on a cpu, one row of Note [CUDA workspace rules] on cuda.
Shape flash_workspace_shape(const TargetProfile& profile, const AttentionShape& dims, bool backward,
                            DType dtype);
// f32 elements of naive attention's workspace (beyond its probabilities) for one kv head's
// `group` query heads of t rows against s keys, operands of `dtype`.
int64_t naive_workspace_floats(const TargetProfile& profile, int64_t group, int64_t t, int64_t s,
                               int64_t d, bool backward, DType dtype);
// f32 elements of the workspace of one (m, k) @ (k, n) GEMM on `dtype` operands. On a cpu
// it stages them: 0 for f32 unless `tf32` (Note [TF32 on the CPU]), and 0 for bf16 when the
// profile has a bf16 GEMM; on cuda it is the cuBLASLt workspace.
int64_t gemm_workspace_floats(const TargetProfile& profile, DType dtype, int64_t m, int64_t n,
                              int64_t k, bool tf32);
// Doubles of the partial sums of one sum over these collapsed dims (0: none).
int64_t sum_workspace_doubles(const TargetProfile& profile, const Shape& kept_shape,
                              const Strides& kept_strides, const Shape& reduced_shape);
// Doubles of the partial sums of one sum of squares over n elements (0: none).
int64_t sum_squares_workspace_doubles(const TargetProfile& profile, int64_t n);
// The partial-sum rows of a norm backward over `rows` rows (its dw / db workspace).
int64_t norm_partitions(const TargetProfile& profile, int64_t rows);
// f32 elements of the workspace of one svd_basis of an (m, n) matrix (GaLore's projection):
// 0 on a cpu, whose SVD works in Eigen's heap (Note [Singular vector signs] in
// tensor/cpu/svd.h); on cuda the Gram matrix and cuSOLVER's arrays (cuda_svd_layout).
int64_t svd_workspace_floats(const TargetProfile& profile, int64_t m, int64_t n, bool left);
// Whether an embedding backward with a `dtype` gradient takes the (n, 2) i64 pairs
// workspace: always for bf16 / f16, and for f32 where the backend sorts f32 too (cuda).
bool embedding_backward_pairs(const TargetProfile& profile, DType dtype);
// Whether the cross-entropy kernels read contiguous `dtype` logits in place (no f32 staging
// scratch): f32 always, bf16 where the backend reads bf16 (cpu; Note [Cross-entropy
// chunking] in tensor/ops/cross_entropy.cpp).
bool cross_entropy_reads_in_place(const TargetProfile& profile, DType dtype);

}  // namespace fitgrad::backend
