// One kernel table per backend (DESIGN.md, Ops). A front-end checks its inputs, allocates
// every output, workspace and staging buffer through the allocator, and then calls
// dispatch() once; the table of the device's backend runs the kernel. Kernels never
// allocate.
//
// Note [Kernel tables]
// A table maps each OpId to a kernel taking that op's argument struct (kernel_args.h). The
// cpu and meta tables are built in (registered on first use, so no static-initialisation
// order or dropped object file can lose them); other backends register theirs with
// register_kernel at static initialisation, as they register raw allocator sources. Meta's
// kernels do nothing, so a dry run makes exactly the real run's allocations. An op that a
// backend lacks throws an Error naming the op and the device; nothing ever falls back to
// another backend. Each registration records its argument type, and dispatch asserts it,
// so a front-end that passes the wrong struct fails loudly instead of reading garbage.
#pragma once

#include <functional>
#include <string>
#include <typeinfo>

#include "tensor/backend/op_id.h"
#include "tensor/backend/profile.h"
#include "tensor/device.h"
#include "tensor/shape.h"

namespace fitgrad::backend {

using ErasedKernel = std::function<void(const void* args)>;

// args_type: the argument struct the kernel reads, or nullptr for a kernel that reads none
// (meta's). Registering an op twice for one backend replaces the kernel.
void register_erased_kernel(DeviceType type, OpId op, const std::type_info* args_type,
                            ErasedKernel kernel);

template <class Args>
void register_kernel(DeviceType type, OpId op, void (*kernel)(const Args&)) {
  register_erased_kernel(type, op, &typeid(Args),
                         [kernel](const void* a) { kernel(*static_cast<const Args*>(a)); });
}

// True when the backend of `type` has a kernel for op.
bool has_kernel(DeviceType type, OpId op);
// Throws "[op] has no kernel on <device>" unless device's backend has one: for front-ends
// that read host-side values (targets, a loss gradient) before their first dispatch.
void require_kernel(OpId op, Device device);

// The kernel of op on device's backend; throws "[op] has no kernel on <device>" when it
// has none, and asserts that the kernel takes `args_type`. Counts the dispatch.
const ErasedKernel& find_kernel(OpId op, Device device, const std::type_info& args_type);

// How many times op has been dispatched in this process, on any device: tests count the
// work a rule does (a frozen Linear's backward runs one GEMM, not two).
uint64_t dispatch_count(OpId op);

template <class Args>
void dispatch(OpId op, Device device, const Args& args) {
  find_kernel(op, device, typeid(Args))(&args);
}

// What a backend declares besides its kernels, for the planner (tensor/backend/profile.h):
// the rules its workspaces are sized by, each a pure function of the target profile and the
// shapes, and what its GEMM reads. Registered with the table; a null rule means the
// backend cannot size that workspace (the profile's function says so).
struct BackendRules {
  // The (rows, f32 elements) workspace of one flash-attention call; rows is the number of
  // threads the kernel splits its tiles over.
  Shape (*flash_workspace)(const TargetProfile& profile, const AttentionShape& dims, bool backward,
                           DType dtype) = nullptr;
  // f32 elements of naive attention's workspace for one kv head's `group` query heads.
  int64_t (*naive_workspace_floats)(const TargetProfile& profile, int64_t group, int64_t t,
                                    int64_t s, int64_t d, bool backward, DType dtype) = nullptr;
  bool bf16_gemm = false;  // the GEMM reads bf16 operands (no f32 staging)
  // The GEMM runs on a library's own threads beside the OpenMP team (OpenBLAS), so the team
  // should not spin while it waits (Note [OpenMP wait policy] in apps/main.cpp).
  bool gemm_threads_apart = false;
  // f32 elements of the workspace of one (m, k) @ (k, n) GEMM on `dtype` operands.
  int64_t (*gemm_workspace_floats)(const TargetProfile& profile, DType dtype, int64_t m, int64_t n,
                                   int64_t k, bool tf32) = nullptr;
  // doubles of the partial sums a sum over these (collapsed) dims needs.
  int64_t (*sum_workspace_doubles)(const TargetProfile& profile, const Shape& kept_shape,
                                   const Strides& kept_strides,
                                   const Shape& reduced_shape) = nullptr;
  // doubles of the partial sums of a sum of squares over n elements.
  int64_t (*sum_squares_workspace_doubles)(const TargetProfile& profile, int64_t n) = nullptr;
  // the partial-sum rows of a norm backward over `rows` rows.
  int64_t (*norm_partitions)(const TargetProfile& profile, int64_t rows) = nullptr;
  // f32 elements of the workspace of one svd_basis of an (m, n) matrix, basis on the left
  // (m) side or the right (n) one.
  int64_t (*svd_workspace_floats)(const TargetProfile& profile, int64_t m, int64_t n,
                                  bool left) = nullptr;
  // The embedding backward sorts its (id, position) pairs for an f32 gradient too (it
  // always does for bf16 / f16), so it takes the pairs workspace.
  bool embedding_sorts_f32 = false;
  // The cross-entropy kernels read contiguous bf16 logits and write their bf16 gradient
  // (CrossEntropyArgs' x_bf16), so the front-end stages only other logits.
  bool cross_entropy_reads_bf16 = false;
  // What the backend runs on, for a run's summary line ("cpu: ISA amx, 2 threads, GEMM mkl
  // (...)"); null when it has nothing to say.
  std::string (*describe)() = nullptr;
};
void register_backend_rules(DeviceType type, BackendRules rules);
// The rules `type` registered (all empty when it registered none).
const BackendRules& backend_rules(DeviceType type);

// The built-in tables, defined next to their kernels (tensor/cpu/kernels.cpp,
// tensor/backend/meta_kernels.cpp) and registered on the first lookup, with the CUDA
// backend's size rules (tensor/backend/cuda_rules.cpp, plain C++ so that a build without
// CUDA plans for a card).
void register_cpu_kernels();
void register_meta_kernels();
void register_cuda_rules();

}  // namespace fitgrad::backend
