// The cuda table's reductions (sum, max, max_backward), row ops (layer_norm, rms_norm,
// (log_)softmax, each with its backward) and the fused cross-entropy (kernels in
// cuda/kernels/reduce.cu and rows.cu), registered at static initialisation.
#include <algorithm>

#include "cuda/error_flags.h"
#include "cuda/ops/op_launch.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"

namespace fitgrad::cuda {
namespace {

ReduceDims dims_of(const char* op, const Shape& shape, const Strides& strides) {
  FG_CHECK(shape.size() <= size_t(kMaxDims),
           "[{}] the cuda kernels take at most {} collapsed dims, got {}", op, kMaxDims,
           shape.size());
  ReduceDims d;
  d.dims = int(shape.size());
  for (int k = 0; k < d.dims; ++k) {
    d.sizes[k] = shape[size_t(k)];
    d.strides[k] = strides[size_t(k)];
  }
  return d;
}

// The chunks of a sum: what its workspace was sized for (Note [CUDA launch shapes]), one
// when the front-end gave none.
int64_t sum_blocks(const backend::SumArgs& a) {
  if (!a.workspace.defined()) return 1;
  const int64_t n_out = std::max<int64_t>(1, numel(a.kept_shape));
  return std::max<int64_t>(1, a.workspace.numel() / 2 / n_out);
}

void sum(const backend::SumArgs& a) {
  OpLaunch launch(a.out);
  double* partial = a.workspace.defined() ? static_cast<double*>(a.workspace.data_ptr()) : nullptr;
  FG_CUDA_CHECK(launch_sum(a.a.dtype(), a.a.data_ptr(),
                           dims_of("sum", a.kept_shape, a.kept_strides),
                           dims_of("sum", a.reduced_shape, a.reduced_strides), sum_blocks(a),
                           a.divisor, a.out.data_ptr(), partial, launch.stream()));
}

void max(const backend::MaxArgs& a) {
  OpLaunch launch(a.values);
  FG_CUDA_CHECK(launch_max(a.a.dtype(), a.a.data_ptr(),
                           dims_of("max", a.kept_shape, a.kept_strides), a.size, a.stride,
                           a.values.data_ptr(), a.indices.data<int64_t>(), launch.stream()));
}

void max_backward(const backend::MaxBackwardArgs& a) {
  OpLaunch launch(a.dx);
  FG_CUDA_CHECK(launch_max_backward(a.dy.dtype(), a.dy.data_ptr(), a.indices.data<int64_t>(),
                                    dims_of("max_backward", a.kept_shape, a.kept_strides), a.stride,
                                    a.dx.data_ptr(), launch.stream()));
}

const void* data_or_null(const Tensor& t) { return t.defined() ? t.data_ptr() : nullptr; }
float* f32_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

void layer_norm(const backend::LayerNormArgs& a) {
  OpLaunch launch(a.y);
  FG_CUDA_CHECK(launch_layer_norm(a.x.dtype(), a.x.data_ptr(), data_or_null(a.weight),
                                  data_or_null(a.bias), a.y.data_ptr(), a.mean.data<float>(),
                                  a.rstd.data<float>(), a.rows, a.c, a.eps, launch.stream()));
}
void layer_norm_backward(const backend::LayerNormBackwardArgs& a) {
  OpLaunch launch(a.dx);
  FG_CUDA_CHECK(launch_norm_backward(
      a.x.dtype(), a.dy.data_ptr(), a.x.data_ptr(), data_or_null(a.weight), a.mean.data<float>(),
      a.rstd.data<float>(), a.dx.data_ptr(), f32_or_null(a.dw), f32_or_null(a.db),
      f32_or_null(a.partials), a.partitions, a.rows, a.c, launch.stream()));
}
void rms_norm(const backend::RmsNormArgs& a) {
  OpLaunch launch(a.y);
  FG_CUDA_CHECK(launch_rms_norm(a.x.dtype(), a.x.data_ptr(), data_or_null(a.weight), a.y.data_ptr(),
                                a.rstd.data<float>(), a.rows, a.c, a.eps, launch.stream()));
}
void rms_norm_backward(const backend::RmsNormBackwardArgs& a) {
  OpLaunch launch(a.dx);
  FG_CUDA_CHECK(launch_norm_backward(
      a.x.dtype(), a.dy.data_ptr(), a.x.data_ptr(), data_or_null(a.weight), nullptr,
      a.rstd.data<float>(), a.dx.data_ptr(), f32_or_null(a.dw), nullptr, f32_or_null(a.partials),
      a.partitions, a.rows, a.c, launch.stream()));
}

template <bool Log>
void softmax(const backend::SoftmaxArgs& a) {
  OpLaunch launch(a.y);
  FG_CUDA_CHECK(launch_softmax(a.x.dtype(), a.x.data_ptr(), a.y.data_ptr(), a.outer, a.n, a.inner,
                               Log, a.causal_t, launch.stream()));
}
template <bool Log>
void softmax_backward(const backend::SoftmaxBackwardArgs& a) {
  OpLaunch launch(a.dx);
  FG_CUDA_CHECK(launch_softmax_backward(a.y.dtype(), a.dy.data_ptr(), a.y.data_ptr(),
                                        a.dx.data_ptr(), a.outer, a.n, a.inner, Log,
                                        launch.stream()));
}

// Targets are checked on the device (Note [Device error flags] in cuda/error_flags.h).
void cross_entropy(const backend::CrossEntropyArgs& a) {
  const int device = device_of(a.stats, "cross_entropy");
  OpLaunch launch(device);
  FG_CUDA_CHECK(launch_cross_entropy(
      a.x, a.targets, a.lse, a.stats, a.loss, a.rows, a.v, a.ignore_index,
      error_record(device, DeviceErrorOp::cross_entropy, a.v), launch.stream()));
}
void cross_entropy_backward(const backend::CrossEntropyBackwardArgs& a) {
  const int device = device_of(a.stats, "cross_entropy_backward");
  OpLaunch launch(device);
  FG_CUDA_CHECK(launch_cross_entropy_backward(
      a.x, a.lse, a.targets, a.rows, a.v, a.ignore_index, a.dloss, a.stats, a.dx,
      error_record(device, DeviceErrorOp::cross_entropy_backward, a.v), launch.stream()));
}

// See Note [Registration at static initialisation] in cuda/raw_sources.cpp.
struct Registrar {
  Registrar() {
    using backend::OpId;
    using backend::register_kernel;
    constexpr DeviceType cuda = DeviceType::cuda;
    register_kernel(cuda, OpId::sum, sum);
    register_kernel(cuda, OpId::max, max);
    register_kernel(cuda, OpId::max_backward, max_backward);
    register_kernel(cuda, OpId::layer_norm, layer_norm);
    register_kernel(cuda, OpId::layer_norm_backward, layer_norm_backward);
    register_kernel(cuda, OpId::rms_norm, rms_norm);
    register_kernel(cuda, OpId::rms_norm_backward, rms_norm_backward);
    register_kernel(cuda, OpId::softmax, softmax<false>);
    register_kernel(cuda, OpId::softmax_backward, softmax_backward<false>);
    register_kernel(cuda, OpId::log_softmax, softmax<true>);
    register_kernel(cuda, OpId::log_softmax_backward, softmax_backward<true>);
    register_kernel(cuda, OpId::cross_entropy, cross_entropy);
    register_kernel(cuda, OpId::cross_entropy_backward, cross_entropy_backward);
  }
};
const Registrar registrar;

}  // namespace
}  // namespace fitgrad::cuda
