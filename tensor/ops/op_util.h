// Shared checks and plumbing for the op front-ends in tensor/ops/ (DESIGN.md, Ops): every
// front-end checks shapes, dtypes and devices with these, allocates its outputs, staging
// buffers and workspaces through Tensor::empty (so the memory context tags them), and then
// dispatches once through its device's kernel table (tensor/backend/kernel_table.h).
//
// Note [Op dtypes and devices]
// Floating ops take f32, f16 or bf16 storage and compute in f32: a front-end converts a
// non-f32 input into an f32 contiguous temporary (to_f32_contiguous), runs the f32 kernel
// and casts the result back to the input dtype. Statistics that backward needs (mean,
// rstd, log-sum-exp) stay f32. Every one of those buffers is allocated before the
// dispatch, on every device, so `meta` (whose kernels do nothing) makes exactly the
// allocations of the real run. A backend without a kernel for the op throws an Error
// naming the op and the device rather than falling back to the host.
//
// Note [Staging is temporary]
// An f32 copy that a front-end makes of a bf16/f16 (or strided) input lives only for the
// op, so it is tagged Category::temporary whatever the caller's scope says: under autocast
// the activation category then holds what backward really keeps, not the kernels' staging.
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
// `t` itself when already f32 and contiguous, else an f32 contiguous copy, tagged
// Category::temporary (Note [Staging is temporary]). On meta the copy is allocated like on
// the CPU.
Tensor to_f32_contiguous(const Tensor& t);
// An operand as its kernel reads it: contiguous in its own dtype when the kernel reads that
// dtype natively, else an f32 contiguous copy (to_f32_contiguous). Undefined stays undefined.
Tensor kernel_operand(const Tensor& t, bool native);
// A result buffer: the result itself, in `dtype`, when the kernel writes it natively, else
// f32 staging cast afterwards (f32_result).
Tensor kernel_result(const Shape& shape, Device device, DType dtype, bool native);
// An f32 buffer for a result that the front-end returns cast to `result_dtype`: when that
// is f32 it is the result itself, allocated in the caller's category; otherwise it is
// staging, tagged Category::temporary (Note [Staging is temporary]).
Tensor f32_result(const Shape& shape, Device device, DType result_dtype);
// The dtype of a binary arithmetic op on a and b, as PyTorch promotes floating dtypes: the
// common dtype when they agree, f32 when either is f32 or when bf16 meets f16.
DType promote_floating(DType a, DType b);
// `t` cast to `dtype` (itself when it already has it).
inline Tensor cast_to(const Tensor& t, DType dtype) { return t.to(dtype); }

}  // namespace fitgrad::ops
