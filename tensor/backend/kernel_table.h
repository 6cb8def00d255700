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
#include <typeinfo>

#include "tensor/backend/op_id.h"
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
// the rules its workspaces are sized by and what its GEMM reads. Registered with the table.
struct BackendRules {
  // f32 elements of one thread's flash-attention workspace for head dim d, with `staged`
  // for bf16/f16 operands; null: none.
  int64_t (*flash_workspace_floats)(int64_t d, bool backward, bool staged) = nullptr;
  // f32 elements of naive attention's workspace for one kv head's `group` query heads.
  int64_t (*naive_workspace_floats)(int64_t group, int64_t t, int64_t s, int64_t d, bool backward,
                                    bool staged) = nullptr;
  bool bf16_gemm = false;  // the GEMM reads bf16 operands (no f32 staging)
  // f32 elements of the workspace an (m, k) @ (k, n) GEMM stages f16 operands (and bf16
  // ones without bf16_gemm) through; null: none.
  int64_t (*gemm_staging_floats)(int64_t m, int64_t n, int64_t k) = nullptr;
  // doubles of the partial sums a sum over these (collapsed) dims needs; null: none.
  int64_t (*sum_workspace_doubles)(const Shape& kept_shape, const Strides& kept_strides,
                                   const Shape& reduced_shape) = nullptr;
  // doubles of the partial sums of a sum of squares over n elements; null: none.
  int64_t (*sum_squares_workspace_doubles)(int64_t n) = nullptr;
};
void register_backend_rules(DeviceType type, BackendRules rules);
// The rules `type` registered (all empty when it registered none).
const BackendRules& backend_rules(DeviceType type);

// The built-in tables, defined next to their kernels (tensor/cpu/kernels.cpp,
// tensor/backend/meta_kernels.cpp) and registered on the first lookup.
void register_cpu_kernels();
void register_meta_kernels();

}  // namespace fitgrad::backend
