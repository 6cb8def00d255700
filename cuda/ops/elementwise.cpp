// The cuda table's copy, fill and elementwise ops (kernels in cuda/kernels/elementwise.cu),
// registered at static initialisation (Note [Kernel tables]).
#include <cstring>

#include "cuda/ops/op_launch.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/convert.h"

namespace fitgrad::cuda {
namespace {

using backend::ElementwiseArgs;
using backend::StridedOperand;

void copy(const backend::CopyArgs& a) {
  const int64_t n = numel(a.shape);
  if (n == 0) return;
  const auto p = make_pack<2>("copy", a.shape, {&a.dst, &a.src});
  OpLaunch launch(device_of(a.dst.data, "copy"));
  FG_CUDA_CHECK(launch_copy(p, n, a.dst.dtype, a.src.dtype, launch.stream()));
}

void fill(const backend::FillArgs& a) {
  const int64_t n = numel(a.shape);
  if (n == 0) return;
  uint64_t bits = 0;  // the value in the destination's dtype, as tensor/convert.h rounds it
  dispatch_dtype(a.dst.dtype, [&](auto tag) {
    const auto v = convert<decltype(tag)>(a.value);
    std::memcpy(&bits, &v, sizeof(v));
  });
  const auto p = make_pack<1>("fill", a.shape, {&a.dst});
  OpLaunch launch(device_of(a.dst.data, "fill"));
  FG_CUDA_CHECK(launch_fill(p, n, a.dst.dtype, bits, launch.stream()));
}

void check_f32(const ElementwiseArgs& a, const char* op) {
  for (const StridedOperand& o : a.operands)
    FG_CHECK(o.dtype == DType::f32, "[{}] the cuda elementwise kernels take f32, got {}", op,
             dtype_name(o.dtype));
}

template <Elementwise K>
void unary(const ElementwiseArgs& a) {
  check_f32(a, "elementwise");
  const int64_t n = numel(a.shape);
  if (n == 0) return;
  const auto p = make_pack<2>("elementwise", a.shape, {&a.operands[0], &a.operands[1]});
  OpLaunch launch(device_of(a.operands[0].data, "elementwise"));
  FG_CUDA_CHECK(launch_unary(K, p, n, a.param, launch.stream()));
}

template <Elementwise K>
void binary_of(const ElementwiseArgs& a, const StridedOperand& out, const StridedOperand& x,
               const StridedOperand& y) {
  check_f32(a, "elementwise");
  const int64_t n = numel(a.shape);
  if (n == 0) return;
  const auto p = make_pack<3>("elementwise", a.shape, {&out, &x, &y});
  OpLaunch launch(device_of(out.data, "elementwise"));
  FG_CUDA_CHECK(launch_binary(K, p, n, launch.stream()));
}
template <Elementwise K>
void binary(const ElementwiseArgs& a) {
  binary_of<K>(a, a.operands[0], a.operands[1], a.operands[2]);
}
void add_in_place(const ElementwiseArgs& a) {
  binary_of<Elementwise::add>(a, a.operands[0], a.operands[0], a.operands[1]);
}

void swiglu_backward(const ElementwiseArgs& a) {
  check_f32(a, "swiglu_backward");
  const int64_t n = numel(a.shape);
  if (n == 0) return;
  const auto& o = a.operands;
  const auto p = make_pack<5>("swiglu_backward", a.shape, {&o[0], &o[1], &o[2], &o[3], &o[4]});
  OpLaunch launch(device_of(o[0].data, "swiglu_backward"));
  FG_CUDA_CHECK(launch_swiglu_backward(p, n, launch.stream()));
}

// See Note [Registration at static initialisation] in cuda/raw_sources.cpp.
struct Registrar {
  Registrar() {
    using backend::OpId;
    using backend::register_kernel;
    using E = Elementwise;
    constexpr DeviceType cuda = DeviceType::cuda;
    register_kernel(cuda, OpId::copy, copy);
    register_kernel(cuda, OpId::fill, fill);
    register_kernel(cuda, OpId::add, binary<E::add>);
    register_kernel(cuda, OpId::sub, binary<E::sub>);
    register_kernel(cuda, OpId::mul, binary<E::mul>);
    register_kernel(cuda, OpId::div, binary<E::div>);
    register_kernel(cuda, OpId::add_, add_in_place);
    register_kernel(cuda, OpId::neg, unary<E::neg>);
    register_kernel(cuda, OpId::exp, unary<E::exp>);
    register_kernel(cuda, OpId::tanh, unary<E::tanh>);
    register_kernel(cuda, OpId::log, unary<E::log>);
    register_kernel(cuda, OpId::sqrt, unary<E::sqrt>);
    register_kernel(cuda, OpId::rsqrt, unary<E::rsqrt>);
    register_kernel(cuda, OpId::pow, unary<E::pow>);
    register_kernel(cuda, OpId::scale, unary<E::scale>);
    register_kernel(cuda, OpId::add_scalar, unary<E::add_scalar>);
    register_kernel(cuda, OpId::gelu, unary<E::gelu>);
    register_kernel(cuda, OpId::silu, unary<E::silu>);
    register_kernel(cuda, OpId::gelu_backward, binary<E::gelu_backward>);
    register_kernel(cuda, OpId::silu_backward, binary<E::silu_backward>);
    register_kernel(cuda, OpId::swiglu, binary<E::swiglu>);
    register_kernel(cuda, OpId::swiglu_backward, swiglu_backward);
  }
};
const Registrar registrar;

}  // namespace
}  // namespace fitgrad::cuda
