// The cuda table's embedding, rope and random ops (dropout, uniform, normal_) (kernels in
// cuda/kernels/embedding_rope.cu and random.cu), registered at static initialisation.
// Embedding ids are checked on the device (Note [Device error flags] in cuda/error_flags.h).
#include "cuda/error_flags.h"
#include "cuda/ops/op_launch.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"

namespace fitgrad::cuda {
namespace {

void embedding(const backend::EmbeddingArgs& a) {
  OpLaunch launch(a.out);
  FG_CUDA_CHECK(launch_embedding(
      a.weight.data_ptr(), a.ids.data_ptr(), a.ids.dtype() == DType::i32, a.out.data_ptr(), a.n,
      a.v, a.c * int64_t(element_size(a.weight.dtype())),
      error_record(a.out.device().index, DeviceErrorOp::embedding, a.v), launch.stream()));
}

void embedding_backward(const backend::EmbeddingBackwardArgs& a) {
  FG_CHECK(a.pairs.defined() || a.n == 0,
           "[embedding_backward] the cuda kernel sorts the ids: it needs the (n, 2) pairs "
           "workspace");
  OpLaunch launch(a.dw);
  FG_CUDA_CHECK(launch_embedding_backward(
      a.dy.dtype(), a.dy.data_ptr(), a.ids.data_ptr(), a.ids.dtype() == DType::i32, a.dw.data_ptr(),
      a.n > 0 ? a.pairs.data<int64_t>() : nullptr, a.n, a.v, a.c,
      error_record(a.dw.device().index, DeviceErrorOp::embedding_backward, a.v), launch.stream()));
}

void rope(const backend::RopeArgs& a) {
  OpLaunch launch(a.y);
  FG_CUDA_CHECK(launch_rope(a.x.dtype(), a.x.data_ptr(), a.table.data<float>(), a.y.data_ptr(),
                            a.bh, a.t, a.d, a.position_offset, a.rope, a.inverse,
                            a.positions.defined() ? a.positions.data<int32_t>() : nullptr, a.heads,
                            launch.stream()));
}

void dropout(const backend::DropoutArgs& a) {
  OpLaunch launch(a.y);
  FG_CUDA_CHECK(launch_dropout(a.x.dtype(), a.x.data_ptr(), a.y.data_ptr(), a.n, a.p, a.state.seed,
                               a.state.offset, launch.stream()));
}

void uniform(const backend::UniformArgs& a) {
  OpLaunch launch(a.out);
  FG_CUDA_CHECK(launch_uniform(a.out.dtype(), a.out.data_ptr(), a.n, a.lo, a.width, a.state.seed,
                               a.state.offset, launch.stream()));
}

void normal(const backend::NormalArgs& a) {
  FG_CHECK(a.out.is_contiguous(), "[normal_] the cuda kernel fills a contiguous tensor");
  OpLaunch launch(a.out);
  FG_CUDA_CHECK(launch_normal(a.out.dtype(), a.out.data_ptr(), a.out.numel(), a.std, a.state.seed,
                              a.state.offset, launch.stream()));
}

// See Note [Registration at static initialisation] in cuda/raw_sources.cpp.
struct Registrar {
  Registrar() {
    using backend::OpId;
    using backend::register_kernel;
    constexpr DeviceType cuda = DeviceType::cuda;
    register_kernel(cuda, OpId::embedding, embedding);
    register_kernel(cuda, OpId::embedding_backward, embedding_backward);
    register_kernel(cuda, OpId::rope, rope);
    register_kernel(cuda, OpId::rope_backward, rope);
    register_kernel(cuda, OpId::dropout, dropout);
    register_kernel(cuda, OpId::dropout_backward, dropout);
    register_kernel(cuda, OpId::uniform, uniform);
    register_kernel(cuda, OpId::normal_, normal);
  }
};
const Registrar registrar;

}  // namespace
}  // namespace fitgrad::cuda
