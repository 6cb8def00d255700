// Shared checks and plumbing for the op front-ends in tensor/ops/ (DESIGN.md, Ops): every
// front-end checks shapes, dtypes and devices with these, allocates its outputs, staging
// buffers and workspaces through Tensor::empty (so the memory context tags them), and then
// dispatches once through its device's kernel table (tensor/backend/kernel_table.h).
//
// Note [Op dtypes and devices]
// Floating ops take f32, f16 or bf16 storage. The kernels read and write that dtype and
// accumulate in f32 (sums in double); where one needs f32 copies of its operands, it
// widens a tile (or a block, or one head) at a time into a bounded workspace the
// front-end allocates, tagged temporary and sized by the backend's pure rules
// (tensor/backend/profile.h), never a whole-tensor copy. Statistics that backward needs
// (mean, rstd, log-sum-exp) stay f32. An op whose operands mix floating dtypes (a norm
// backward fed an f32 gradient for bf16 activations, say) stages them to f32 once
// (kernel_operand) and casts its result back. Every buffer is allocated before the
// dispatch, on every device, so `meta` (whose kernels do nothing) makes exactly the
// allocations of the real run. A backend without a kernel for the op throws an Error
// naming the op and the device rather than falling back to the host.
//
// Note [Staging is temporary]
// An f32 copy that a front-end makes of a mixed-dtype (or strided) input lives only for
// the op, so it is tagged Category::temporary whatever the caller's scope says: under
// autocast the activation category then holds what backward really keeps.
#pragma once

#include <initializer_list>

#include "tensor/tensor.h"

namespace fitgrad::ops {

// Throws "[op] <name> must be f32, f16 or bf16, got i64" unless floating.
void check_floating(const char* op, const char* name, const Tensor& t);
// Throws "[op] <name> is undefined" / "[op] tensors are on cpu and meta" when they differ.
void check_same_device(const char* op, std::initializer_list<const Tensor*> tensors);
// Throws "[op] <name> has shape (..), expected (..)".
void check_shape(const char* op, const char* name, const Tensor& t, const Shape& expected);
// Throws "[op] <name> must be <ndim>-d, got shape (..)".
void check_dim(const char* op, const char* name, const Tensor& t, int64_t ndim);
// An operand as its kernel reads it: contiguous in its own dtype when `native` (its
// operands share a dtype), else an f32 contiguous copy tagged Category::temporary (Note
// [Staging is temporary]; on meta allocated like on the CPU). Undefined stays undefined.
Tensor kernel_operand(const Tensor& t, bool native);
// A result buffer: the result itself, in `dtype`, when `native`, else an f32 buffer that
// the front-end casts to `dtype` afterwards (the result itself when `dtype` is f32, in the
// caller's category; temporary staging otherwise).
Tensor kernel_result(const Shape& shape, Device device, DType dtype, bool native);
// An f32 workspace of `floats` elements tagged Category::temporary, or undefined when
// floats is 0 (the kernel needs none).
Tensor f32_workspace(int64_t floats, Device device);
// Note [Double workspaces]
// Some kernels keep partial sums in double (a long sum split over threads, the squared
// norm's chunks) so their result does not depend on the thread count. The storage dtypes
// have no f64, so such a workspace is an f32 temporary of twice the count, which the
// kernel reads as doubles (the allocator aligns every block far beyond 8 bytes). Its size
// is the backend's pure rule (backend::sum_workspace_doubles, sum_squares_workspace_doubles).
Tensor f64_workspace(int64_t doubles, Device device);
// The doubles of such an f32 tensor (an f64_workspace, or ops::zero_doubles' accumulators),
// as a kernel reads them.
inline double* doubles_in(const Tensor& t) { return reinterpret_cast<double*>(t.data<float>()); }
// The dtype of a binary arithmetic op on a and b, as PyTorch promotes floating dtypes: the
// common dtype when they agree, f32 when either is f32 or when bf16 meets f16.
DType promote_floating(DType a, DType b);
// `t` cast to `dtype` (itself when it already has it).
inline Tensor cast_to(const Tensor& t, DType dtype) { return t.to(dtype); }

}  // namespace fitgrad::ops
