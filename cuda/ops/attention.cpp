// The cuda table's attention ops: flash attention forward and backward (kernels in
// cuda/kernels/attention_flash.cu, attention_flash_backward.cu and attention_flash_simt.cu)
// and the naive reference (attention_naive.cu), registered at static initialisation (Note
// [Kernel tables]). The adapters check what the front-end (tensor/ops/attention.cpp) cannot
// know about the card:
// the head dim the kernels take (<= kCudaFlashMaxHeadDim), the path of the call
// (cuda_flash_path: dtype, head dim, operand alignment, compute capability) and that its
// shared memory fits the device. The flash kernels take no workspace (Note [CUDA attention
// accumulation] in attention_flash_backward.cu).
#include <cstdint>
#include <initializer_list>

#include "cuda/kernels/attention_launch.h"
#include "cuda/ops/op_launch.h"
#include "tensor/backend/cuda_flash_launch.h"
#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"

namespace fitgrad::cuda {
namespace {

using backend::AttentionShape;
using backend::CudaFlashPath;

AttentionSizes sizes_of(const AttentionShape& s, const backend::AttentionMask& mask, float scale,
                        const backend::AttentionDropoutArgs& dropout = {}) {
  return {s.batch,
          s.hq,
          s.hkv,
          s.t,
          s.s,
          s.d,
          mask,
          scale,
          dropout.p,
          dropout.state.seed,
          dropout.state.offset};
}

// Every operand is defined, contiguous, on the same cuda device and of `dtype` (an f32, bf16
// or f16 dtype).
void check_operands(const char* op, DType dtype, std::initializer_list<const Tensor*> operands) {
  FG_CHECK(dtype == DType::f32 || dtype == DType::bf16 || dtype == DType::f16,
           "[{}] the cuda kernels take f32, bf16 or f16, got {}", op, dtype_name(dtype));
  for (const Tensor* t : operands) {
    FG_CHECK(t->defined() && t->is_contiguous(), "[{}] the cuda kernels take contiguous operands",
             op);
    FG_CHECK(t->dtype() == dtype, "[{}] an operand is {} where the call's dtype is {}", op,
             dtype_name(t->dtype()), dtype_name(dtype));
  }
}

void check_f32(const char* op, const char* name, const Tensor& t) {
  FG_CHECK(t.defined() && t.is_contiguous() && t.dtype() == DType::f32,
           "[{}] {} must be a contiguous f32 tensor", op, name);
}

void* ptr(const Tensor& t) { return t.data_ptr(); }
float* f32(const Tensor& t) { return static_cast<float*>(t.data_ptr()); }

bool aligned16(std::initializer_list<const Tensor*> operands) {
  for (const Tensor* t : operands)
    if (reinterpret_cast<uintptr_t>(t->data_ptr()) % 16 != 0) return false;
  return true;
}

// The flash path of a call on cuda:device, checked against the card.
CudaFlashPath flash_path(const char* op, const AttentionShape& dims, DType dtype, bool aligned,
                         int device, bool backward) {
  FG_CHECK(dims.d <= backend::kCudaFlashMaxHeadDim,
           "[{}] the cuda kernels take head dims up to {}, got {}", op,
           backend::kCudaFlashMaxHeadDim, dims.d);
  int major = 0, smem_optin = 0;
  FG_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  FG_CUDA_CHECK(
      cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  const CudaFlashPath path = backend::cuda_flash_path(dtype, dims.d, aligned, major);
  const int64_t smem = backend::cuda_flash_smem_bytes(path, dims.d, backward);
  FG_CHECK(smem <= smem_optin,
           "[{}] head dim {} in {} needs {} bytes of shared memory per block on the {} path; "
           "cuda:{} allows {}",
           op, dims.d, dtype_name(dtype), smem, path == CudaFlashPath::mma ? "mma" : "simt", device,
           smem_optin);
  return path;
}

void flash_attention(const backend::FlashAttentionArgs& a) {
  const char* op = "flash_attention";
  const DType dtype = a.q.dtype();
  check_operands(op, dtype, {&a.q, &a.k, &a.v, &a.o});
  check_f32(op, "lse", a.lse);
  OpLaunch launch(a.q);
  const CudaFlashPath path =
      flash_path(op, a.dims, dtype, aligned16({&a.q, &a.k, &a.v, &a.o}), a.q.device().index, false);
  FG_CUDA_CHECK(launch_flash_attention_forward(sizes_of(a.dims, a.mask, a.scale, a.dropout), dtype,
                                               path, ptr(a.q), ptr(a.k), ptr(a.v), ptr(a.o),
                                               f32(a.lse), launch.stream()));
}

void flash_attention_backward(const backend::FlashAttentionBackwardArgs& a) {
  const char* op = "flash_attention_backward";
  const DType dtype = a.q.dtype();
  check_operands(op, dtype, {&a.dout, &a.q, &a.k, &a.v, &a.o, &a.dq, &a.dk, &a.dv});
  check_f32(op, "lse", a.lse);
  check_f32(op, "delta", a.delta);
  // a.workspace is not read: the kernels need none (cuda_rules.cpp's flash_workspace is
  // {1, 0}), so it may be empty or undefined.
  const AttentionShape& x = a.dims;
  OpLaunch launch(a.q);
  const bool aligned = aligned16({&a.dout, &a.q, &a.k, &a.v, &a.o, &a.dq, &a.dk, &a.dv});
  const CudaFlashPath path = flash_path(op, x, dtype, aligned, a.q.device().index, true);
  FG_CUDA_CHECK(launch_flash_attention_backward(sizes_of(x, a.mask, a.scale, a.dropout), dtype,
                                                path, ptr(a.dout), ptr(a.q), ptr(a.k), ptr(a.v),
                                                ptr(a.o), f32(a.lse), f32(a.delta), ptr(a.dq),
                                                ptr(a.dk), ptr(a.dv), launch.stream()));
}

void naive_attention(const backend::NaiveAttentionArgs& a) {
  const char* op = "naive_attention";
  const DType dtype = a.q.dtype();
  check_operands(op, dtype, {&a.q, &a.k, &a.v, &a.o});
  check_f32(op, "probs", a.probs);
  OpLaunch launch(a.q);
  FG_CUDA_CHECK(launch_naive_attention_forward(sizes_of(a.dims, a.mask, a.scale), dtype, ptr(a.q),
                                               ptr(a.k), ptr(a.v), f32(a.probs), ptr(a.o),
                                               launch.stream()));
}

void naive_attention_backward(const backend::NaiveAttentionBackwardArgs& a) {
  const char* op = "naive_attention_backward";
  const DType dtype = a.q.dtype();
  check_operands(op, dtype, {&a.dout, &a.q, &a.k, &a.v, &a.dq, &a.dk, &a.dv});
  check_f32(op, "probs", a.probs);
  check_f32(op, "dprobs", a.dprobs);
  OpLaunch launch(a.q);
  FG_CUDA_CHECK(launch_naive_attention_backward(
      sizes_of(a.dims, a.mask, a.scale), dtype, ptr(a.dout), ptr(a.q), ptr(a.k), ptr(a.v),
      f32(a.probs), f32(a.dprobs), ptr(a.dq), ptr(a.dk), ptr(a.dv), launch.stream()));
}

// See Note [Registration at static initialisation] in cuda/raw_sources.cpp.
struct Registrar {
  Registrar() {
    using backend::OpId;
    using backend::register_kernel;
    constexpr DeviceType cuda = DeviceType::cuda;
    register_kernel(cuda, OpId::flash_attention, flash_attention);
    register_kernel(cuda, OpId::flash_attention_backward, flash_attention_backward);
    register_kernel(cuda, OpId::naive_attention, naive_attention);
    register_kernel(cuda, OpId::naive_attention_backward, naive_attention_backward);
  }
};
const Registrar registrar;

}  // namespace
}  // namespace fitgrad::cuda
