// Elementwise arithmetic op front-ends (issue 3; DESIGN.md, Ops): broadcasting add, sub,
// mul and div, the scalar ops (scale, add_scalar, pow) and the unary math ops, plus the
// in-place add_ that accumulates gradients. They are raw ops, without autograd: each
// checks its inputs, allocates its output and dispatches through the kernel table.
// All take f32, f16 or bf16 storage, compute in f32 and return the input dtype
// (Note [Op dtypes and devices]); inputs may be any views (Note [Elementwise operands keep
// their strides]). The backward of these ops is composed from them and ops::sum_to.
#pragma once

#include <initializer_list>
#include <utility>
#include <vector>

#include "tensor/backend/op_id.h"
#include "tensor/tensor.h"

namespace fitgrad::ops {

// NumPy broadcasting (broadcast_shapes); a and b on one device, floating dtypes promoted as
// PyTorch does (bf16 + f32 is f32; ops::promote_floating).
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);

Tensor scale(const Tensor& a, double s);       // a * s
Tensor add_scalar(const Tensor& a, double s);  // a + s
Tensor neg(const Tensor& a);
Tensor exp(const Tensor& a);
Tensor tanh(const Tensor& a);
Tensor log(const Tensor& a);
Tensor sqrt(const Tensor& a);
Tensor rsqrt(const Tensor& a);          // 1 / sqrt(a)
Tensor pow(const Tensor& a, double p);  // a^p, in f32 (std::pow)

// dst += src in place, src broadcasting to dst's shape; dst keeps its dtype (src may have
// another floating dtype). dst must not be an expanded view. For gradient accumulation.
void add_(Tensor& dst, const Tensor& src);

namespace detail {

// Shared by the elementwise front-ends (here and activation.cpp).

// Throws "[op] ..." unless every named tensor is floating, and all share one dtype and
// one device.
void check_inputs(const char* op,
                  std::initializer_list<std::pair<const char*, const Tensor*>> inputs);

// Runs elementwise op `id` over `shape`: the inputs (each broadcasting to `shape`) are
// brought to f32, `n_out` f32 outputs of `shape` are allocated, and the kernel gets the
// collapsed shape and the operands, outputs first (backend::ElementwiseArgs), with `param`
// for the scalar ops. The outputs are returned cast to `dtype`.
std::vector<Tensor> run_elementwise(backend::OpId id, const Shape& shape, DType dtype,
                                    const std::vector<Tensor>& inputs, int n_out,
                                    float param = 0.0f);

}  // namespace detail
}  // namespace fitgrad::ops
