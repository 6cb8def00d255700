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
// `t` itself when already f32 and contiguous, else an f32 contiguous copy. On meta the
// copy is allocated like on the CPU.
Tensor to_f32_contiguous(const Tensor& t);
// `t` cast to `dtype` (itself when it already has it).
inline Tensor cast_to(const Tensor& t, DType dtype) { return t.to(dtype); }

}  // namespace fitgrad::ops
