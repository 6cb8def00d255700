// The cpu backend's kernel table (Note [Kernel tables] in tensor/backend/kernel_table.h):
// one adapter per op from its argument struct to the f32 kernels of this folder.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <type_traits>

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/convert.h"
#include "tensor/cpu/adafactor.h"
#include "tensor/cpu/adam8bit.h"
#include "tensor/cpu/apollo.h"
#include "tensor/cpu/attention.h"
#include "tensor/cpu/copy.h"
#include "tensor/cpu/cross_entropy.h"
#include "tensor/cpu/dropout.h"
#include "tensor/cpu/elementwise.h"
#include "tensor/cpu/embedding.h"
#include "tensor/cpu/four_bit_matvec.h"
#include "tensor/cpu/gemm.h"
#include "tensor/cpu/gemm_bf16.h"
#include "tensor/cpu/gemm_staged.h"
#include "tensor/cpu/gemv_bf16.h"
#include "tensor/cpu/norm.h"
#include "tensor/cpu/optim_update.h"
#include "tensor/cpu/reduce.h"
#include "tensor/cpu/rope.h"
#include "tensor/cpu/softmax.h"
#include "tensor/cpu/svd.h"
#include "tensor/cpu_isa.h"
#include "tensor/quant/dynamic_map.h"
#include "tensor/quant/four_bit.h"
#include "tensor/quant/int8.h"
#include "tensor/random/philox.h"

namespace fitgrad::backend {
namespace {

using cpu::BinaryOp;
using cpu::UnaryOp;

float* f32(const Tensor& t) { return t.data<float>(); }
float* f32_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }
// A double workspace (Note [Double workspaces] in tensor/ops/op_util.h), or null.
double* doubles_or_null(const Tensor& t) { return reinterpret_cast<double*>(f32_or_null(t)); }
cpu::AttentionDims dims_of(const AttentionShape& s) {
  return {s.batch, s.hq, s.hkv, s.t, s.s, s.d};
}

void copy(const CopyArgs& a) { cpu::copy_strided(a.shape, a.dst, a.src); }
void fill(const FillArgs& a) { cpu::fill_strided(a.shape, a.dst, a.value); }

template <UnaryOp K>
void unary(const ElementwiseArgs& a) {
  cpu::unary_f32(K, a.param, a.shape, a.operands[0], a.operands[1]);
}
template <BinaryOp K>
void binary(const ElementwiseArgs& a) {
  cpu::binary_f32(K, a.shape, a.operands[0], a.operands[1], a.operands[2]);
}
void add_in_place(const ElementwiseArgs& a) {
  cpu::binary_f32(BinaryOp::add, a.shape, a.operands[0], a.operands[0], a.operands[1]);
}
void swiglu_backward(const ElementwiseArgs& a) {
  const auto& t = a.operands;
  cpu::swiglu_backward_f32(a.shape, t[0], t[1], t[2], t[3], t[4]);
}

void sum(const SumArgs& a) {
  dispatch_floating(a.a.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::sum(a.kept_shape, a.kept_strides, a.reduced_shape, a.reduced_strides, a.a.data<E>(),
             a.divisor, a.out.data<E>(), doubles_or_null(a.workspace));
  });
}
void max(const MaxArgs& a) {
  dispatch_floating(a.a.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::max(a.kept_shape, a.kept_strides, a.size, a.stride, a.a.data<E>(), a.values.data<E>(),
             a.indices.data<int64_t>());
  });
}
void max_backward(const MaxBackwardArgs& a) {
  dispatch_floating(a.dy.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::max_backward(a.kept_shape, a.kept_strides, a.size, a.stride, a.dy.data<E>(),
                      a.indices.data<int64_t>(), a.dx.data<E>());
  });
}

// c (m, n) = op(a) op(b) (+ bias) on one matrix, in the operands' dtype: the f32 GEMM, the
// bf16 GEMM, or the staged one when the front-end gave a workspace (f16, bf16 without a
// bf16 GEMM, f32 in TF32 mode).
// A bf16 product of one row against a weight stored (n, k), a decode step's, runs on the GEMV
// where it exists (Note [bf16 GEMV] in gemv_bf16.cpp); a staging workspace the front-end
// planned for it is then left unused.
void gemm_one(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
              const void* a, int64_t lda, const void* b, int64_t ldb, const void* bias, void* c,
              bool tf32, const Tensor& workspace) {
  if (dtype == DType::bf16 && m == 1 && !trans_a && trans_b && cpu::gemv_bf16_available()) {
    cpu::gemv_bf16(n, k, static_cast<const BFloat16*>(a), static_cast<const BFloat16*>(b), ldb,
                   static_cast<const BFloat16*>(bias), c, DType::bf16);
    return;
  }
  if (workspace.defined()) {
    dispatch_floating(dtype, "staged gemm", [&](auto e) {
      using E = decltype(e);
      cpu::gemm_staged(trans_a, trans_b, m, n, k, static_cast<const E*>(a), lda,
                       static_cast<const E*>(b), ldb, static_cast<const E*>(bias),
                       static_cast<E*>(c), n, tf32, f32(workspace));
    });
    return;
  }
  if (dtype == DType::bf16) {
    cpu::gemm_bf16(trans_a, trans_b, m, n, k, static_cast<const BFloat16*>(a), lda,
                   static_cast<const BFloat16*>(b), ldb, static_cast<const BFloat16*>(bias), c,
                   DType::bf16, n);
    return;
  }
  float* y = static_cast<float*>(c);
  float beta = 0.0f;
  if (bias) {
    const auto* pb = static_cast<const float*>(bias);
    for (int64_t r = 0; r < m; ++r) std::copy(pb, pb + n, y + r * n);
    beta = 1.0f;
  }
  cpu::gemm_f32(trans_a, trans_b, m, n, k, 1.0f, static_cast<const float*>(a), lda,
                static_cast<const float*>(b), ldb, beta, y, n);
}

void matmul(const MatmulArgs& a) {
  if (a.a.dtype() == DType::f32 && !a.workspace.defined()) {
    cpu::gemm_f32_batched(a.trans_a, a.trans_b, a.batch, a.m, a.n, a.k, 1.0f, f32(a.a), a.lda,
                          a.stride_a, f32(a.b), a.ldb, a.stride_b, 0.0f, f32(a.c), a.n, a.m * a.n);
    return;
  }
  const int64_t elem = int64_t(element_size(a.a.dtype()));
  const auto* pa = static_cast<const char*>(a.a.data_ptr());
  const auto* pb = static_cast<const char*>(a.b.data_ptr());
  auto* pc = static_cast<char*>(a.c.data_ptr());
  for (int64_t i = 0; i < a.batch; ++i)
    gemm_one(a.a.dtype(), a.trans_a, a.trans_b, a.m, a.n, a.k, pa + i * a.stride_a * elem, a.lda,
             pb + i * a.stride_b * elem, a.ldb, nullptr, pc + i * a.m * a.n * elem, a.tf32,
             a.workspace);
}
void linear(const LinearArgs& a) {
  gemm_one(a.x.dtype(), false, true, a.rows, a.out, a.in, a.x.data_ptr(), a.in, a.weight.data_ptr(),
           a.in, a.bias.defined() ? a.bias.data_ptr() : nullptr, a.y.data_ptr(), a.tf32,
           a.workspace);
}

template <class E>
const E* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<E>() : nullptr;
}

void layer_norm(const LayerNormArgs& a) {
  dispatch_floating(a.x.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::layer_norm(a.x.data<E>(), data_or_null<E>(a.weight), data_or_null<E>(a.bias),
                    a.y.data<E>(), f32(a.mean), f32(a.rstd), a.rows, a.c, a.eps);
  });
}
void layer_norm_backward(const LayerNormBackwardArgs& a) {
  dispatch_floating(a.x.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::layer_norm_backward(a.dy.data<E>(), a.x.data<E>(), data_or_null<E>(a.weight), f32(a.mean),
                             f32(a.rstd), a.dx.data<E>(), f32_or_null(a.dw), f32_or_null(a.db),
                             f32_or_null(a.partials), a.partitions, a.rows, a.c);
  });
}
void rms_norm(const RmsNormArgs& a) {
  dispatch_floating(a.x.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::rms_norm(a.x.data<E>(), data_or_null<E>(a.weight), a.y.data<E>(), f32(a.rstd), a.rows, a.c,
                  a.eps);
  });
}
void rms_norm_backward(const RmsNormBackwardArgs& a) {
  dispatch_floating(a.x.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::rms_norm_backward(a.dy.data<E>(), a.x.data<E>(), data_or_null<E>(a.weight), f32(a.rstd),
                           a.dx.data<E>(), f32_or_null(a.dw), f32_or_null(a.partials), a.partitions,
                           a.rows, a.c);
  });
}

template <bool Log>
void softmax(const SoftmaxArgs& a) {
  dispatch_floating(a.x.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::softmax(a.x.data<E>(), a.y.data<E>(), a.outer, a.n, a.inner, Log, a.causal_t);
  });
}
template <bool Log>
void softmax_backward(const SoftmaxBackwardArgs& a) {
  dispatch_floating(a.y.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::softmax_backward(a.dy.data<E>(), a.y.data<E>(), a.dx.data<E>(), a.outer, a.n, a.inner,
                          Log);
  });
}

cpu::AttentionDropout dropout_of(const AttentionDropoutArgs& a) {
  return {a.p, a.state.seed, a.state.offset};
}

void flash_attention(const FlashAttentionArgs& a) {
  dispatch_floating(a.q.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::flash_attention_forward(dims_of(a.dims), a.mask, a.scale, dropout_of(a.dropout),
                                 a.q.data<E>(), a.k.data<E>(), a.v.data<E>(), a.o.data<E>(),
                                 f32(a.lse), f32(a.workspace), a.threads);
  });
}
void flash_attention_backward(const FlashAttentionBackwardArgs& a) {
  dispatch_floating(a.q.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::flash_attention_backward(dims_of(a.dims), a.mask, a.scale, dropout_of(a.dropout),
                                  a.dout.data<E>(), a.q.data<E>(), a.k.data<E>(), a.v.data<E>(),
                                  a.o.data<E>(), f32(a.lse), f32(a.delta), a.dq.data<E>(),
                                  a.dk.data<E>(), a.dv.data<E>(), f32(a.workspace), a.threads);
  });
}
void naive_attention(const NaiveAttentionArgs& a) {
  dispatch_floating(a.q.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::naive_attention_forward(dims_of(a.dims), a.mask, a.scale, a.q.data<E>(), a.k.data<E>(),
                                 a.v.data<E>(), f32(a.probs), a.o.data<E>(),
                                 f32_or_null(a.workspace));
  });
}
void naive_attention_backward(const NaiveAttentionBackwardArgs& a) {
  dispatch_floating(a.q.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::naive_attention_backward(dims_of(a.dims), a.mask, a.scale, a.dout.data<E>(), a.q.data<E>(),
                                  a.k.data<E>(), a.v.data<E>(), f32(a.probs), f32(a.dprobs),
                                  a.dq.data<E>(), a.dk.data<E>(), a.dv.data<E>(),
                                  f32_or_null(a.workspace));
  });
}

template <class Fn>
void with_ids(const Tensor& ids, Fn&& fn) {
  if (ids.dtype() == DType::i32)
    fn(ids.data<int32_t>());
  else
    fn(ids.data<int64_t>());
}
void embedding(const EmbeddingArgs& a) {
  with_ids(a.ids, [&](const auto* p) {
    cpu::embedding_gather(a.weight.data_ptr(), p, a.out.data_ptr(), a.n, a.v,
                          size_t(a.c) * element_size(a.weight.dtype()));
  });
}
void embedding_backward(const EmbeddingBackwardArgs& a) {
  with_ids(a.ids, [&](const auto* p) {
    dispatch_floating(a.dy.dtype(), "cpu kernel", [&](auto e) {
      using E = decltype(e);
      if constexpr (std::is_same_v<E, float>)
        cpu::embedding_scatter_add_f32(f32(a.dy), p, f32(a.dw), a.n, a.v, a.c);
      else
        cpu::embedding_scatter_add_sorted(a.dy.data<E>(), p, a.dw.data<E>(), a.n, a.v, a.c,
                                          a.pairs.data<int64_t>());
    });
  });
}

void rope(const RopeArgs& a) {
  cpu::rope_table_f32(f32(a.table), a.t, a.d, a.position_offset, a.rope);
  dispatch_floating(a.x.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::rope(a.x.data<E>(), f32(a.table), a.y.data<E>(), a.bh, a.t, a.d, a.inverse,
              a.positions.defined() ? a.positions.data<int32_t>() : nullptr, a.heads);
  });
}
void dropout(const DropoutArgs& a) {
  dispatch_floating(a.x.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    cpu::dropout(a.x.data<E>(), a.y.data<E>(), a.n, a.p, a.state.seed, a.state.offset);
  });
}
void uniform(const UniformArgs& a) {
  dispatch_floating(a.out.dtype(), "cpu kernel", [&](auto e) {
    using E = decltype(e);
    E* data = a.out.data<E>();
    philox_for_each_uniform(a.state.seed, a.state.offset, a.n,
                            [&](int64_t i, float u) { data[i] = convert<E>(a.lo + a.width * u); });
  });
}

template <class T>
void normal_into(const NormalArgs& a, T* out) {
  const int64_t len = a.out.numel(), draws = len + (len & 1);
  const uint64_t seed = a.state.seed, offset = a.state.offset;
#pragma omp parallel for schedule(static)
  for (int64_t k = 0; k < draws; k += 2) {
    const double u0 = philox_uniform(seed, offset + uint64_t(k));
    const double u1 = philox_uniform(seed, offset + uint64_t(k) + 1);
    const double r = std::sqrt(-2.0 * std::log(1.0 - u0));
    const double angle = 2.0 * std::numbers::pi * u1;
    out[k] = convert<T>(float(a.std * r * std::cos(angle)));
    if (k + 1 < len) out[k + 1] = convert<T>(float(a.std * r * std::sin(angle)));
  }
}
void normal(const NormalArgs& a) {
  dispatch_floating(a.out.dtype(), "normal_",
                    [&](auto e) { normal_into(a, a.out.data<decltype(e)>()); });
}

// Throws for a target outside [0, v) that is not ignore_index; returns the rows counted.
int64_t check_targets(const char* op, int64_t rows, int64_t v, const int64_t* targets,
                      int64_t ignore_index, int64_t first_row) {
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    if (targets[r] == ignore_index) continue;
    FG_CHECK(targets[r] >= 0 && targets[r] < v,
             "[{}] target {} at row {} is out of range for {} classes (ignore_index {})", op,
             targets[r], first_row + r, v, ignore_index);
    ++count;
  }
  return count;
}
// Note [Cross-entropy statistics on the device] in kernel_args.h.
void cross_entropy(const CrossEntropyArgs& a) {
  const int64_t count =
      check_targets("cross_entropy", a.rows, a.v, a.targets, a.ignore_index, a.first_row);
  if (a.x) {
    cpu::cross_entropy_lse(a.rows, a.v, a.x, a.lse);
    a.stats[0] += cpu::cross_entropy_nll_sum(a.rows, a.v, a.x, a.lse, a.targets, a.ignore_index);
  } else {
    cpu::cross_entropy_lse(a.rows, a.v, a.x_bf16, a.lse);
    a.stats[0] +=
        cpu::cross_entropy_nll_sum(a.rows, a.v, a.x_bf16, a.lse, a.targets, a.ignore_index);
  }
  a.stats[1] += double(count);
  if (a.loss) *a.loss = a.stats[1] > 0 ? float(a.stats[0] / a.stats[1]) : 0.0f;
}
void cross_entropy_backward(const CrossEntropyBackwardArgs& a) {
  check_targets("cross_entropy_backward", a.rows, a.v, a.targets, a.ignore_index, a.first_row);
  const float g = a.stats[1] > 0 ? float(double(*a.dloss) / a.stats[1]) : 0.0f;
  if (a.x)
    cpu::cross_entropy_grad(a.rows, a.v, a.x, a.lse, a.targets, a.ignore_index, g, a.dx);
  else
    cpu::cross_entropy_grad(a.rows, a.v, a.x_bf16, a.lse, a.targets, a.ignore_index, g, a.dx_bf16);
}

void adamw_update(const AdamWArgs& a) {
  cpu::adamw_update(a.k, a.param.data_ptr(), a.param.dtype(), a.grad.data_ptr(), a.grad.dtype(),
                    f32(a.exp_avg), f32(a.exp_avg_sq), a.param.numel(), a.sr);
}
void sgd_update(const SgdArgs& a) {
  cpu::sgd_update(a.k, a.param.data_ptr(), a.param.dtype(), a.grad.data_ptr(), a.grad.dtype(),
                  f32_or_null(a.momentum_buffer), a.param.numel(), a.sr);
}
void svd_basis(const SvdBasisArgs& a) {
  cpu::svd_basis(a.a.data_ptr(), a.a.dtype(), a.m, a.n, a.r, a.left, a.out.data_ptr(),
                 a.out.dtype());
}
quant::FourBitType four_bit_type(const FourBitArgs& a) {
  return a.fp4 ? quant::FourBitType::fp4 : quant::FourBitType::nf4;
}
void quantize_4bit(const FourBitArgs& a) {
  dispatch_floating(a.a_or_out.dtype(), "quantize_4bit", [&](auto e) {
    quant::quantize_four_bit(a.a_or_out.data<decltype(e)>(), a.n, a.blocksize, four_bit_type(a),
                             a.packed.data<uint8_t>(), f32(a.absmax));
  });
  if (a.nested.defined())
    quant::quantize_absmax(f32(a.absmax), a.absmax.numel(), a.nested.data<uint8_t>(),
                           f32(a.absmax2), f32(a.offset));
}
void dequantize_4bit(const FourBitArgs& a) {
  if (a.nested.defined())
    quant::dequantize_absmax(a.nested.data<uint8_t>(), f32(a.absmax2), f32(a.offset)[0],
                             a.nested.numel(), f32(a.absmax));
  dispatch_floating(a.a_or_out.dtype(), "dequantize_4bit", [&](auto e) {
    quant::dequantize_four_bit(a.packed.data<uint8_t>(), f32(a.absmax), a.n, a.blocksize,
                               four_bit_type(a), a.a_or_out.data<decltype(e)>());
  });
}
void quantize_int8(const Int8Args& a) {
  dispatch_floating(a.a_or_out.dtype(), "quantize_int8", [&](auto e) {
    quant::quantize_int8(a.a_or_out.data<decltype(e)>(), a.n, a.group_size, a.codes.data<uint8_t>(),
                         f32(a.scales), a.zeros.data<uint8_t>(), a.sr.enabled, a.sr.seed,
                         a.sr.offset);
  });
}
void dequantize_int8(const Int8Args& a) {
  dispatch_floating(a.a_or_out.dtype(), "dequantize_int8", [&](auto e) {
    quant::dequantize_int8(a.codes.data<uint8_t>(), f32(a.scales), a.zeros.data<uint8_t>(), a.n,
                           a.group_size, a.a_or_out.data<decltype(e)>());
  });
}
// The absmaxes of a FourBitReadArgs, dequantized into its temporary when double-quantized.
const float* read_absmax(const FourBitReadArgs& a) {
  if (a.nested.defined())
    quant::dequantize_absmax(a.nested.data<uint8_t>(), f32(a.absmax2), f32(a.offset)[0],
                             a.nested.numel(), f32(a.absmax));
  return f32(a.absmax);
}
void embedding_4bit(const FourBitReadArgs& a) {
  const float* absmax = read_absmax(a);
  const quant::FourBitType type = a.fp4 ? quant::FourBitType::fp4 : quant::FourBitType::nf4;
  with_ids(a.ids_or_x, [&](const auto* ids) {
    const int64_t n = a.ids_or_x.numel();
    for (int64_t i = 0; i < n; ++i)
      FG_CHECK(ids[i] >= 0 && int64_t(ids[i]) < a.rows,
               "[embedding_4bit] id {} at position {} is out of range for {} embeddings",
               int64_t(ids[i]), i, a.rows);
    dispatch_floating(a.out.dtype(), "embedding_4bit", [&](auto e) {
      quant::dequantize_four_bit_rows(a.packed.data<uint8_t>(), absmax, a.cols, a.blocksize, type,
                                      ids, n, a.out.data<decltype(e)>());
    });
  });
}
void linear_4bit(const FourBitReadArgs& a) {
  cpu::BlockAbsmax absmax;  // the double-quantized absmaxes are read in place
  if (a.nested.defined()) {
    absmax.codes = a.nested.data<uint8_t>();
    absmax.absmax2 = f32(a.absmax2);
    absmax.offset = f32(a.offset)[0];
    absmax.map = quant::dynamic_map_signed().data();
  } else {
    absmax.absmax = f32(a.absmax);
  }
  cpu::four_bit_matvec(a.packed.data<uint8_t>(), absmax, a.rows, a.cols, a.blocksize,
                       a.fp4 ? quant::FourBitType::fp4 : quant::FourBitType::nf4, f32(a.ids_or_x),
                       a.ids_or_x.size(0), f32(a.staging), f32(a.out));
}
void sum_squares(const SumSquaresArgs& a) {
  *a.acc +=
      cpu::sum_squares(a.x.data_ptr(), a.x.dtype(), a.x.numel(), doubles_or_null(a.workspace));
}
void scale_in_place(const ScaleInPlaceArgs& a) {
  float factor = a.factor;
  if (a.clip_sum_squares) {  // ScaleInPlaceArgs in kernel_args.h
    const double total = std::sqrt(*a.clip_sum_squares);
    const double coef = a.max_norm / (total + 1e-6);
    if (!std::isfinite(total) || coef >= 1) return;
    factor = float(coef);
  }
  cpu::scale_inplace(a.x.data_ptr(), a.x.dtype(), a.x.numel(), factor);
}

// ---- the CPU's workspace rules (tensor/backend/profile.h), over its kernels' own ----
namespace rules {

// One row of per-thread tiles for each of the profile's threads.
Shape flash_workspace(const TargetProfile& p, const AttentionShape& dims, bool backward,
                      DType dtype) {
  return {p.threads, cpu::flash_workspace_floats(dims.d, backward, dtype != DType::f32)};
}

int64_t naive_workspace_floats(const TargetProfile&, int64_t group, int64_t t, int64_t s, int64_t d,
                               bool backward, DType dtype) {
  return cpu::naive_workspace_floats(group, t, s, d, backward, dtype != DType::f32);
}

// f32 reads its operands as they are, except in TF32 mode (Note [TF32 on the CPU]), and so
// does bf16 with a bf16 GEMM; everything else is staged (Note [Staged GEMM blocks]).
int64_t gemm_workspace_floats(const TargetProfile& p, DType dtype, int64_t m, int64_t n, int64_t k,
                              bool tf32) {
  if ((dtype == DType::f32 && !tf32) || (dtype == DType::bf16 && p.bf16_gemm)) return 0;
  return cpu::gemm_staged_workspace_floats(m, n, k);
}

int64_t sum_workspace_doubles(const TargetProfile&, const Shape& kept_shape,
                              const Strides& kept_strides, const Shape& reduced_shape) {
  return cpu::sum_workspace_doubles(kept_shape, kept_strides, reduced_shape);
}

int64_t sum_squares_workspace_doubles(const TargetProfile&, int64_t n) {
  return cpu::sum_squares_workspace_doubles(n);
}

// A partition per thread, at most one per row.
int64_t norm_partitions(const TargetProfile& p, int64_t rows) {
  return std::max<int64_t>(1, std::min<int64_t>(p.threads, rows));
}

// The ISA level, the thread budget and the GEMM library in force (issue 60).
std::string describe() {
  return fmt::format("cpu: ISA {}, {} threads, GEMM {}", cpu_isa_name(cpu_isa()),
                     cpu::gemm_threads(), cpu::gemm_description());
}

// Nothing from the allocator: Eigen's SVD works in its own heap (tensor/cpu/svd.h).
int64_t svd_workspace_floats(const TargetProfile&, int64_t, int64_t, bool) { return 0; }

}  // namespace rules

}  // namespace

void register_cpu_kernels() {
  // The ISA level first: a bad FITGRAD_CPU_ISA is an Error here, on the thread of the first
  // op, and never inside a kernel's OpenMP region (Note [CPU ISA levels]).
  cpu_isa();
  constexpr DeviceType cpu = DeviceType::cpu;
  register_backend_rules(cpu,
                         {.flash_workspace = rules::flash_workspace,
                          .naive_workspace_floats = rules::naive_workspace_floats,
                          .bf16_gemm = cpu::gemm_bf16_preferred(),
                          .gemm_threads_apart = cpu::gemm_backend() == cpu::GemmBackend::openblas,
                          .gemm_workspace_floats = rules::gemm_workspace_floats,
                          .sum_workspace_doubles = rules::sum_workspace_doubles,
                          .sum_squares_workspace_doubles = rules::sum_squares_workspace_doubles,
                          .norm_partitions = rules::norm_partitions,
                          .svd_workspace_floats = rules::svd_workspace_floats,
                          .cross_entropy_reads_bf16 = true,
                          .describe = rules::describe});
  register_kernel(cpu, OpId::copy, copy);
  register_kernel(cpu, OpId::fill, fill);
  register_kernel(cpu, OpId::add, binary<BinaryOp::add>);
  register_kernel(cpu, OpId::sub, binary<BinaryOp::sub>);
  register_kernel(cpu, OpId::mul, binary<BinaryOp::mul>);
  register_kernel(cpu, OpId::div, binary<BinaryOp::div>);
  register_kernel(cpu, OpId::add_, add_in_place);
  register_kernel(cpu, OpId::neg, unary<UnaryOp::neg>);
  register_kernel(cpu, OpId::exp, unary<UnaryOp::exp>);
  register_kernel(cpu, OpId::tanh, unary<UnaryOp::tanh>);
  register_kernel(cpu, OpId::log, unary<UnaryOp::log>);
  register_kernel(cpu, OpId::sqrt, unary<UnaryOp::sqrt>);
  register_kernel(cpu, OpId::rsqrt, unary<UnaryOp::rsqrt>);
  register_kernel(cpu, OpId::pow, unary<UnaryOp::pow>);
  register_kernel(cpu, OpId::scale, unary<UnaryOp::scale>);
  register_kernel(cpu, OpId::add_scalar, unary<UnaryOp::add_scalar>);
  register_kernel(cpu, OpId::gelu, unary<UnaryOp::gelu>);
  register_kernel(cpu, OpId::silu, unary<UnaryOp::silu>);
  register_kernel(cpu, OpId::gelu_backward, binary<BinaryOp::gelu_backward>);
  register_kernel(cpu, OpId::silu_backward, binary<BinaryOp::silu_backward>);
  register_kernel(cpu, OpId::swiglu, binary<BinaryOp::swiglu>);
  register_kernel(cpu, OpId::swiglu_backward, swiglu_backward);
  register_kernel(cpu, OpId::sum, sum);
  register_kernel(cpu, OpId::max, max);
  register_kernel(cpu, OpId::max_backward, max_backward);
  register_kernel(cpu, OpId::matmul, matmul);
  register_kernel(cpu, OpId::linear, linear);
  register_kernel(cpu, OpId::layer_norm, layer_norm);
  register_kernel(cpu, OpId::layer_norm_backward, layer_norm_backward);
  register_kernel(cpu, OpId::rms_norm, rms_norm);
  register_kernel(cpu, OpId::rms_norm_backward, rms_norm_backward);
  register_kernel(cpu, OpId::softmax, softmax<false>);
  register_kernel(cpu, OpId::softmax_backward, softmax_backward<false>);
  register_kernel(cpu, OpId::log_softmax, softmax<true>);
  register_kernel(cpu, OpId::log_softmax_backward, softmax_backward<true>);
  register_kernel(cpu, OpId::flash_attention, flash_attention);
  register_kernel(cpu, OpId::flash_attention_backward, flash_attention_backward);
  register_kernel(cpu, OpId::naive_attention, naive_attention);
  register_kernel(cpu, OpId::naive_attention_backward, naive_attention_backward);
  register_kernel(cpu, OpId::embedding, embedding);
  register_kernel(cpu, OpId::embedding_backward, embedding_backward);
  register_kernel(cpu, OpId::rope, rope);
  register_kernel(cpu, OpId::rope_backward, rope);
  register_kernel(cpu, OpId::dropout, dropout);
  register_kernel(cpu, OpId::dropout_backward, dropout);
  register_kernel(cpu, OpId::uniform, uniform);
  register_kernel(cpu, OpId::normal_, normal);
  register_kernel(cpu, OpId::cross_entropy, cross_entropy);
  register_kernel(cpu, OpId::cross_entropy_backward, cross_entropy_backward);
  register_kernel(cpu, OpId::adamw_update, adamw_update);
  register_kernel(cpu, OpId::sgd_update, sgd_update);
  register_kernel(cpu, OpId::sum_squares, sum_squares);
  register_kernel(cpu, OpId::scale_, scale_in_place);
  register_kernel(cpu, OpId::adam8bit_update, cpu::adam8bit_update);
  register_kernel(cpu, OpId::adafactor_update, cpu::adafactor_update);
  register_kernel(cpu, OpId::apollo_update, cpu::apollo_update);
  register_kernel(cpu, OpId::svd_basis, svd_basis);
  register_kernel(cpu, OpId::quantize_4bit, quantize_4bit);
  register_kernel(cpu, OpId::dequantize_4bit, dequantize_4bit);
  register_kernel(cpu, OpId::quantize_int8, quantize_int8);
  register_kernel(cpu, OpId::dequantize_int8, dequantize_int8);
  register_kernel(cpu, OpId::embedding_4bit, embedding_4bit);
  register_kernel(cpu, OpId::linear_4bit, linear_4bit);
}

}  // namespace fitgrad::backend
