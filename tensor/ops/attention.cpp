// Attention front-ends (see attention.h): checks, allocation of outputs and workspaces, and
// dispatch through the kernel table. The kernels read and write q's dtype (f32, bf16 or f16)
// and stage low-precision operands tile by tile in their workspace (Note [Staged attention
// tiles] in tensor/cpu/attention_flash.cpp).
//
// Note [Attention memory]
// What each call allocates, in order (o, dq, dk and dv in q's dtype, the rest f32):
//   flash_attention            o (B,Hq,T,D), lse (B,Hq,T), workspace (threads, W_fwd)
//   flash_attention_backward   dq, dk, dv, delta (B,Hq,T), workspace (threads, W_bwd)
//   naive_attention            o, probs (B,Hq,T,S), [workspace]
//   naive_attention_backward   dq, dk, dv, probs, dprobs (B,Hq,T,S), [workspace]
// (a backward whose dout or o is not in q's dtype casts it first). The naive workspace
// exists for bf16/f16 only and holds one kv head's operands (naive_workspace_floats).
// On a cpu, W = backend::flash_workspace_floats(profile, D, backward, dtype) does not depend on
// T or S, and threads is the target profile's (backend::attention_threads), so flash's peak
// is linear in the sequence length and naive's quadratic (a cuda target's workspace is
// backend::flash_workspace_shape's one row, Note [CUDA workspace rules] in profile.h); tests/tensor/ops/attention_test.cpp
// asserts these sums byte for byte. Workspaces and probabilities are tagged
// Category::temporary and freed before the call returns.
#include "tensor/ops/attention.h"

#include <cmath>
#include <string_view>

#include "tensor/backend/kernel_args.h"
#include "tensor/backend/kernel_table.h"
#include "tensor/backend/profile.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/op_util.h"

namespace fitgrad::ops {
namespace {

// Checks q, k, v and the mask against each other and returns their sizes.
backend::AttentionShape check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const backend::AttentionMask& mask) {
  FG_CHECK(mask.window >= 0 && (mask.window == 0 || mask.causal),
           "[{}] a sliding window ({}) must be positive and causal (Note [Sliding-window "
           "attention])",
           op, mask.window);
  FG_CHECK(mask.softcap >= 0 && std::isfinite(mask.softcap),
           "[{}] the score soft cap {} must be positive (or 0: none)", op, mask.softcap);
  FG_CHECK(mask.softcap == 0 || std::string_view(op).starts_with("flash_attention"),
           "[{}] soft-capped scores (Gemma 2) are implemented by flash attention (CPU and cuda), "
           "not by naive attention",
           op);
  check_floating(op, "q", q);
  check_floating(op, "k", k);
  check_floating(op, "v", v);
  check_same_device(op, {&q, &k, &v});
  check_dim(op, "q", q, 4);
  check_dim(op, "k", k, 4);
  check_dim(op, "v", v, 4);
  FG_CHECK(k.dtype() == q.dtype() && v.dtype() == q.dtype(),
           "[{}] q, k and v must share a dtype, got {}, {} and {}", op, dtype_name(q.dtype()),
           dtype_name(k.dtype()), dtype_name(v.dtype()));
  const backend::AttentionShape dims{q.size(0), q.size(1), k.size(1),
                                     q.size(2), k.size(2), q.size(3)};
  FG_CHECK(k.size(0) == dims.batch && k.size(3) == dims.d,
           "[{}] k has shape {}, expected (B, Hkv, S, D) with B = {} and D = {} of q {}", op,
           shape_str(k.shape()), dims.batch, dims.d, shape_str(q.shape()));
  check_shape(op, "v", v, k.shape());
  FG_CHECK(dims.hkv >= 1 && dims.hq % dims.hkv == 0,
           "[{}] q's {} heads are not a multiple of k's {} heads (q {}, k {})", op, dims.hq,
           dims.hkv, shape_str(q.shape()), shape_str(k.shape()));
  FG_CHECK(dims.d >= 1, "[{}] head dim is 0 (q {})", op, shape_str(q.shape()));
  FG_CHECK(!mask.packed() || (mask.causal && dims.t == dims.s),
           "[{}] packed rows are causal self-attention (Note [Packed rows]); got {} queries "
           "against {} keys{}",
           op, dims.t, dims.s, mask.causal ? "" : " without the causal mask");
  return dims;
}

void check_dropout_p(const char* op, double p) {
  FG_CHECK(p >= 0 && p < 1, "[{}] dropout p = {} must be in [0, 1)", op, p);
}

float resolve_scale(const char* op, double scale, int64_t d) {
  FG_CHECK(std::isfinite(scale), "[{}] scale {} is not finite", op, scale);
  return scale == 0 ? float(1.0 / std::sqrt(double(d))) : float(scale);
}

Tensor temporary(const Shape& shape, Device device) {
  CategoryScope category(Category::temporary);
  return Tensor::empty(shape, DType::f32, device);
}

// `t` (dout or o of a backward) in q's dtype: itself, or a cast tagged temporary when the
// caller mixed dtypes.
Tensor in_dtype_of(const Tensor& t, DType dtype) {
  if (t.dtype() == dtype) return t.contiguous();
  CategoryScope category(Category::temporary);
  return t.to(dtype).contiguous();
}

}  // namespace

backend::AttentionMask packed_rows_mask(backend::AttentionMask mask, const Tensor& segments) {
  const char* op = "attention";
  FG_CHECK(segments.dtype() == DType::i32 && segments.dim() == 3 && segments.size(0) == 2 &&
               segments.is_contiguous(),
           "[{}] packed rows take contiguous (2, B, T) i32 example bounds, got {} {}", op,
           dtype_name(segments.dtype()), shape_str(segments.shape()));
  FG_CHECK(mask.causal, "[{}] packed rows need the causal mask (Note [Packed rows])", op);
  if (!segments.device().has_bytes()) return mask;  // nothing is computed on meta
  const int32_t* bounds = segments.data<int32_t>();
  mask.example_begin = bounds;
  mask.example_end = bounds + segments.size(1) * segments.size(2);
  return mask;
}

AttentionOut flash_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                             const backend::AttentionMask& mask, double scale, double dropout_p,
                             Generator& gen) {
  const backend::OpId id = backend::OpId::flash_attention;
  const char* op = backend::op_name(id);
  const backend::AttentionShape dims = check_qkv(op, q, k, v, mask);
  const float sc = resolve_scale(op, scale, dims.d);
  check_dropout_p(op, dropout_p);
  FG_CHECK(dropout_p == 0 || mask.softcap == 0,
           "[{}] dropout with soft-capped scores is not supported (Note [Soft-capped scores])", op);
  const backend::TargetProfile profile = backend::profile_for(q.device());
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  Tensor o = Tensor::empty(q.shape(), q.dtype(), q.device());  // (B, Hq, T, D)
  Tensor lse = Tensor::empty({dims.batch, dims.hq, dims.t}, DType::f32, q.device());  // (B, Hq, T)
  // The draws of the (B, Hq, T, S) probabilities (Note [Dropout inside flash attention]).
  const RngState state =
      dropout_p > 0 ? gen.reserve(uint64_t(dims.batch * dims.hq * dims.t * dims.s)) : gen.state();
  {
    const Shape ws = backend::flash_workspace_shape(profile, dims, false, q.dtype());
    const int threads = int(ws[0]);
    const Tensor workspace = temporary(ws, q.device());
    backend::dispatch(
        id, q.device(),
        backend::FlashAttentionArgs{
            dims, mask, sc, threads, {dropout_p, state}, qc, kc, vc, o, lse, workspace});
  }
  return {o, lse, state};
}

AttentionGrads flash_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const Tensor& o, const Tensor& lse,
                                        const backend::AttentionMask& mask, double scale,
                                        double dropout_p, const RngState& dropout_state) {
  const backend::OpId id = backend::OpId::flash_attention_backward;
  const char* op = backend::op_name(id);
  const backend::AttentionShape dims = check_qkv(op, q, k, v, mask);
  check_floating(op, "dout", dout);
  check_floating(op, "o", o);
  FG_CHECK(lse.defined(), "[{}] lse is undefined", op);
  check_same_device(op, {&q, &dout, &o, &lse});
  check_shape(op, "dout", dout, q.shape());
  check_shape(op, "o", o, q.shape());
  check_shape(op, "lse", lse, {dims.batch, dims.hq, dims.t});
  FG_CHECK(lse.dtype() == DType::f32, "[{}] lse must be f32, got {}", op, dtype_name(lse.dtype()));
  const float sc = resolve_scale(op, scale, dims.d);
  check_dropout_p(op, dropout_p);
  const backend::TargetProfile profile = backend::profile_for(q.device());
  const Tensor doutc = in_dtype_of(dout, q.dtype()), qc = q.contiguous(), kc = k.contiguous(),
               vc = v.contiguous(), oc = in_dtype_of(o, q.dtype()), lsec = lse.contiguous();
  Tensor dq = Tensor::empty(q.shape(), q.dtype(), q.device());  // (B, Hq, T, D)
  Tensor dk = Tensor::empty(k.shape(), q.dtype(), q.device());  // (B, Hkv, S, D)
  Tensor dv = Tensor::empty(k.shape(), q.dtype(), q.device());  // (B, Hkv, S, D)
  {
    const Tensor delta = temporary({dims.batch, dims.hq, dims.t}, q.device());
    const Shape ws = backend::flash_workspace_shape(profile, dims, true, q.dtype());
    const int threads = int(ws[0]);
    const Tensor workspace = temporary(ws, q.device());
    backend::dispatch(id, q.device(),
                      backend::FlashAttentionBackwardArgs{dims,
                                                          mask,
                                                          sc,
                                                          threads,
                                                          {dropout_p, dropout_state},
                                                          doutc,
                                                          qc,
                                                          kc,
                                                          vc,
                                                          oc,
                                                          lsec,
                                                          delta,
                                                          dq,
                                                          dk,
                                                          dv,
                                                          workspace});
  }
  return {dq, dk, dv};
}

namespace {

// Naive attention's workspace (undefined when its size is 0, as for f32 operands).
Tensor naive_workspace(const backend::AttentionShape& dims, bool backward, DType dtype,
                       Device device) {
  return f32_workspace(
      backend::naive_workspace_floats(backend::profile_for(device), dims.hq / dims.hkv, dims.t,
                                      dims.s, dims.d, backward, dtype),
      device);
}

}  // namespace

Tensor naive_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                       const backend::AttentionMask& mask, double scale) {
  const backend::OpId id = backend::OpId::naive_attention;
  const char* op = backend::op_name(id);
  const backend::AttentionShape dims = check_qkv(op, q, k, v, mask);
  const float sc = resolve_scale(op, scale, dims.d);
  const Tensor qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  Tensor o = Tensor::empty(q.shape(), q.dtype(), q.device());  // (B, Hq, T, D)
  {
    const Tensor probs = temporary({dims.batch, dims.hq, dims.t, dims.s}, q.device());
    const Tensor workspace = naive_workspace(dims, false, q.dtype(), q.device());
    backend::dispatch(id, q.device(),
                      backend::NaiveAttentionArgs{dims, mask, sc, qc, kc, vc, probs, o, workspace});
  }
  return o;
}

AttentionGrads naive_attention_backward(const Tensor& dout, const Tensor& q, const Tensor& k,
                                        const Tensor& v, const backend::AttentionMask& mask,
                                        double scale) {
  const backend::OpId id = backend::OpId::naive_attention_backward;
  const char* op = backend::op_name(id);
  const backend::AttentionShape dims = check_qkv(op, q, k, v, mask);
  check_floating(op, "dout", dout);
  check_same_device(op, {&q, &dout});
  check_shape(op, "dout", dout, q.shape());
  const float sc = resolve_scale(op, scale, dims.d);
  const Tensor doutc = in_dtype_of(dout, q.dtype()), qc = q.contiguous(), kc = k.contiguous(),
               vc = v.contiguous();
  Tensor dq = Tensor::empty(q.shape(), q.dtype(), q.device());  // (B, Hq, T, D)
  Tensor dk = Tensor::empty(k.shape(), q.dtype(), q.device());  // (B, Hkv, S, D)
  Tensor dv = Tensor::empty(k.shape(), q.dtype(), q.device());  // (B, Hkv, S, D)
  {
    const Shape scores{dims.batch, dims.hq, dims.t, dims.s};
    const Tensor probs = temporary(scores, q.device()), dprobs = temporary(scores, q.device());
    const Tensor workspace = naive_workspace(dims, true, q.dtype(), q.device());
    backend::dispatch(id, q.device(),
                      backend::NaiveAttentionBackwardArgs{dims, mask, sc, doutc, qc, kc, vc, probs,
                                                          dprobs, dq, dk, dv, workspace});
  }
  return {dq, dk, dv};
}

}  // namespace fitgrad::ops
