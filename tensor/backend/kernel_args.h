// The argument structs of the kernels (Note [Kernel tables] in kernel_table.h): what a
// front-end hands a backend after checking shapes and allocating every buffer. They hold
// tensors (handles, so a meta kernel can take them without touching bytes) and plain
// sizes; no shape or stride logic happens behind them (DESIGN.md: it lives in tensor/).
// The kernels read and write the operands' own floating dtype (Note [Op dtypes and devices]
// in tensor/ops/op_util.h); each struct's comments give the shapes and dtypes, and every
// workspace a kernel needs comes in its struct, sized by the backend's rules.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/backend/apollo_workspace.h"
#include "tensor/backend/attention_mask.h"
#include "tensor/backend/strided.h"
#include "tensor/half.h"
#include "tensor/random/generator.h"
#include "tensor/rope_params.h"
#include "tensor/tensor.h"

namespace fitgrad::backend {

// copy (dst[i] = convert(src[i])) and fill (dst[i] = convert(value)) over `shape`.
struct CopyArgs {
  Shape shape;
  StridedOperand dst, src;
};
struct FillArgs {
  Shape shape;
  StridedOperand dst;
  double value = 0;
};

// Every elementwise op over the (collapsed) `shape`: the outputs first, then the inputs,
// all f32. Unary ops read `param` (scale, add_scalar, pow). add_ has one operand that is
// both its output and its first input.
struct ElementwiseArgs {
  Shape shape;
  std::vector<StridedOperand> operands;
  float param = 0;
};

// sum: out (O) = sum over the reduced index space of a, divided by `divisor`, in a's
// floating dtype; workspace holds the partial sums (backend::sum_workspace_doubles).
struct SumArgs {
  Shape kept_shape, reduced_shape;
  Strides kept_strides, reduced_strides;  // of a, in elements
  Tensor a;
  double divisor = 1;
  Tensor out;        // (O)
  Tensor workspace;  // f32 of 2 x the doubles, temporary, or undefined
};
// max along one dim of length `size`, stride `stride`: values (in a's dtype) and argmax
// indices (O).
struct MaxArgs {
  Shape kept_shape;
  Strides kept_strides;
  int64_t size = 0, stride = 0;
  Tensor a;
  Tensor values, indices;  // (O), (O) i64
};
// dx (zeroed, input shape, dy's dtype) gets dy at each indices' position.
struct MaxBackwardArgs {
  Shape kept_shape;
  Strides kept_strides;  // of dx
  int64_t size = 0, stride = 0;
  Tensor dy, indices;  // (O) contiguous, (O) i64 contiguous
  Tensor dx;
};

// matmul: c (batch, m, n) = op(a) op(b), one matrix per batch index with per-operand
// batch strides (0 broadcasts one matrix). linear: y (rows, n) = x (rows, k) w^T (n, k)
// + bias (n) when defined. Every operand has one floating dtype (Note [Native products] in
// tensor/ops/matmul.cpp); the workspace (gemm_workspace_floats) is defined when that dtype
// is staged.
struct MatmulArgs {
  bool trans_a = false, trans_b = false;
  int64_t batch = 1, m = 0, n = 0, k = 0;
  Tensor a, b;  // contiguous
  int64_t lda = 0, ldb = 0, stride_a = 0, stride_b = 0;
  Tensor c;           // (batch, m, n)
  Tensor workspace;   // f32 temporary, or undefined
  bool tf32 = false;  // f32 operands rounded to TF32 (Note [TF32 on the CPU]); needs workspace
};
struct LinearArgs {
  int64_t rows = 0, in = 0, out = 0;
  Tensor x, weight, bias;  // (rows, in), (out, in), (out) or undefined; contiguous
  Tensor y;                // (rows, out)
  Tensor workspace;        // f32 temporary, or undefined
  bool tf32 = false;       // as in MatmulArgs
};

// Norms over the last dim C of `rows` rows. Undefined weight / bias / dw / db are absent.
struct LayerNormArgs {
  int64_t rows = 0, c = 0;
  float eps = 0;
  Tensor x, weight, bias;  // (rows, C), (C), (C)
  Tensor y, mean, rstd;    // (rows, C), (rows), (rows)
};
struct LayerNormBackwardArgs {
  int64_t rows = 0, c = 0, partitions = 0;
  Tensor dy, x, weight, mean, rstd;  // (rows, C), (rows, C), (C), (rows), (rows)
  Tensor dx, dw, db;                 // (rows, C), (C), (C)
  Tensor partials;                   // (partitions, 2 C) workspace, when dw or db is defined
};
struct RmsNormArgs {
  int64_t rows = 0, c = 0;
  float eps = 0;
  Tensor x, weight;  // (rows, C), (C)
  Tensor y, rstd;    // (rows, C), (rows)
};
struct RmsNormBackwardArgs {
  int64_t rows = 0, c = 0, partitions = 0;
  Tensor dy, x, weight, rstd;  // (rows, C), (rows, C), (C), (rows)
  Tensor dx, dw;               // (rows, C), (C)
  Tensor partials;             // (partitions, C) workspace, when dw is defined
};

// (log_)softmax of a contiguous (outer, n, inner) tensor along n; every operand of one
// floating dtype, read and written natively.
// causal_t > 0 (softmax only, inner 1): row r is query r % causal_t of causal_t queries
// over the n keys, aligned to the end (Note [Causal softmax] in tensor/ops/softmax.h): its
// first (r % causal_t) + 1 + n - causal_t columns are kept and the rest of y is 0.
struct SoftmaxArgs {
  int64_t outer = 1, n = 1, inner = 1;
  Tensor x, y;
  int64_t causal_t = 0;
};
struct SoftmaxBackwardArgs {
  int64_t outer = 1, n = 1, inner = 1;
  Tensor dy, y, dx;
};

struct AttentionShape {
  int64_t batch = 0, hq = 0, hkv = 0, t = 0, s = 0, d = 0;
};
// Dropout on the (B, Hq, T, S) probabilities of flash attention: p = 0 is none; element
// (b, h, i, j) takes draw state.offset + its flat index (Note [Dropout inside flash
// attention] in tensor/ops/attention.h).
struct AttentionDropoutArgs {
  double p = 0;
  RngState state;
};
// q (B, Hq, T, D), k and v (B, Hkv, S, D), contiguous, of one floating dtype, which o, dout,
// dq, dk and dv share; lse, delta, probs and the workspaces are f32.
struct FlashAttentionArgs {
  AttentionShape dims;
  AttentionMask mask;
  float scale = 1;
  int threads = 1;
  AttentionDropoutArgs dropout;
  Tensor q, k, v;
  Tensor o, lse;     // (B, Hq, T, D), (B, Hq, T)
  Tensor workspace;  // (threads, flash_workspace_floats) temporary
};
struct FlashAttentionBackwardArgs {
  AttentionShape dims;
  AttentionMask mask;
  float scale = 1;
  int threads = 1;
  AttentionDropoutArgs dropout;
  Tensor dout, q, k, v, o, lse;
  Tensor delta;  // (B, Hq, T) temporary
  Tensor dq, dk, dv;
  Tensor workspace;  // (threads, flash_workspace_floats) temporary
};
struct NaiveAttentionArgs {
  AttentionShape dims;
  AttentionMask mask;
  float scale = 1;
  Tensor q, k, v;
  Tensor probs;  // (B, Hq, T, S) temporary
  Tensor o;
  Tensor workspace;  // (naive_workspace_floats) temporary, undefined when that is 0
};
struct NaiveAttentionBackwardArgs {
  AttentionShape dims;
  AttentionMask mask;
  float scale = 1;
  Tensor dout, q, k, v;
  Tensor probs, dprobs;  // (B, Hq, T, S) temporaries
  Tensor dq, dk, dv;
  Tensor workspace;  // (naive_workspace_floats) temporary, undefined when that is 0
};

// embedding: out (n, C) = weight (V, C) rows at ids (n), in weight's dtype. backward:
// dw (V, C) = the deterministic scatter-add of dy (n, C) at ids, in dy's dtype (Note
// [Low-precision embedding backward] in tensor/cpu/embedding.cpp).
struct EmbeddingArgs {
  int64_t n = 0, v = 0, c = 0;
  Tensor weight, ids, out;  // ids i32 or i64 contiguous
};
struct EmbeddingBackwardArgs {
  int64_t n = 0, v = 0, c = 0;
  Tensor dy, ids, dw;  // dy (n, C) and dw (V, C) of one floating dtype
  Tensor pairs;  // (n, 2) i64 temporary when backend::embedding_backward_pairs, else undefined
};

// RoPE over (B H, T, D) rows, with the (2, T, D/2) cos/sin table an f32 workspace that the
// kernel fills; inverse rotates back (the backward). x and y contiguous, in one floating
// dtype, read and written natively. positions, when defined, is (B, T) i32 in [0, T): the
// table row each position takes (packed rows), H = heads rows a batch row.
struct RopeArgs {
  int64_t bh = 0, t = 0, d = 0, position_offset = 0;
  RopeParams rope;  // Note [RoPE frequencies]
  bool inverse = false;
  Tensor x, table, y;
  Tensor positions;
  int64_t heads = 1;
};

// y (n) = x (n) masked with the Philox stream at `state` and scaled by 1 / (1 - p); x and y
// contiguous, in one floating dtype, read and written natively.
struct DropoutArgs {
  int64_t n = 0;
  double p = 0;
  RngState state;
  Tensor x, y;
};

// out (n) = lo + width * u for the Philox stream's uniforms u at `state`, computed in f32
// and rounded once to out's floating dtype.
struct UniformArgs {
  int64_t n = 0;
  RngState state;
  float lo = 0, width = 1;
  Tensor out;
};

// out (contiguous, any floating dtype) = std * the Box-Muller normals of the Philox stream
// at `state`: draws 2j and 2j+1 give elements 2j (cosine) and 2j+1 (sine), each computed in
// double, rounded to f32 and then to out's dtype; an odd count draws one uniform more.
struct NormalArgs {
  RngState state;
  double std = 1;
  Tensor out;
};

// One chunk of rows of the fused cross-entropy (tensor/ops/cross_entropy.cpp walks them):
// lse (rows) and the summed negative log-likelihood, or the gradient rows.
// Note [Cross-entropy statistics on the device]
// The forward's chunks add into stats (two doubles in device memory): [0] the rows'
// negative log-likelihood, [1] the rows counted (target not ignore_index). The last chunk
// also writes loss = stats[0] / stats[1] (0 when no row counted), and the backward scales
// by dloss / stats[1], both read by the kernels where they are: nothing goes through the
// host (Note [Host reads] in tensor/host_reads.h). A target outside [0, V) that is not
// ignore_index is an error: the CPU kernels throw it, naming the row (first_row + r) and the
// value; a device kernel counts it in its backend's error flags, which the host reads at
// the next check (check_device_errors in tensor/device_copy.h), and skips the row.
// A backend whose rules say cross_entropy_reads_bf16 (BackendRules in kernel_table.h) is
// handed contiguous bf16 logits as they are: x is null and x_bf16 set, and the backward
// writes the bf16 gradient into dx_bf16 instead of dx.
struct CrossEntropyArgs {
  int64_t rows = 0, v = 0, ignore_index = 0;
  int64_t first_row = 0;             // of this chunk, for errors
  const float* x = nullptr;          // (rows, V) f32, staged or in place
  const BFloat16* x_bf16 = nullptr;  // (rows, V) bf16 in place, when x is null
  const int64_t* targets = nullptr;  // (rows)
  float* lse = nullptr;              // (rows)
  double* stats = nullptr;           // (2) += the chunk's NLL and count (device memory)
  float* loss = nullptr;             // () set from stats on the last chunk, else null
};
struct CrossEntropyBackwardArgs {
  int64_t rows = 0, v = 0, ignore_index = 0;
  int64_t first_row = 0;
  const float* dloss = nullptr;   // () f32 (device memory)
  const double* stats = nullptr;  // (2) the forward's: g = dloss / stats[1]
  const float* x = nullptr;
  const BFloat16* x_bf16 = nullptr;  // when x is null
  const float* lse = nullptr;
  const int64_t* targets = nullptr;
  float* dx = nullptr;          // (rows, V), may alias x; null with x_bf16
  BFloat16* dx_bf16 = nullptr;  // (rows, V) with x_bf16
};

// Stochastic rounding of an optimizer's bf16 parameter writes (pure bf16 training, Note
// [Stochastic rounding] in tensor/cpu/param_store.h): element i of the parameter takes the
// 32 random bits of Philox draw offset + i of `seed`. Off, or on any other dtype, every
// write rounds to nearest even.
struct StochasticRounding {
  bool enabled = false;
  uint64_t seed = 0, offset = 0;
};

// The fused optimizer updates over one parameter's n elements; param, grad and the f32
// states are contiguous, param and grad in any floating dtype (computed in f32, rounded
// back). The scalars are torch.optim's, already rounded to f32 as torch's f32 kernels round
// them. AdamW, per element:
//   p = p * decay                      (decay = 1 - lr * weight_decay)
//   m = m * beta1 + g * (1 - beta1)
//   v = v * beta2 + g * g * (1 - beta2)
//   p = p + neg_step_size * (m / (sqrt(v) / bias_correction2_sqrt + eps))
struct AdamWScalars {
  float decay, beta1, one_minus_beta1, beta2, one_minus_beta2, bias_correction2_sqrt, eps,
      neg_step_size;
};
struct AdamWArgs {
  AdamWScalars k;
  Tensor param, grad, exp_avg, exp_avg_sq;
  StochasticRounding sr;
};
// SGD, per element: d = g + weight_decay * p, then with momentum
//   buf = first ? d : buf * momentum + d * (1 - dampening)
//   d = nesterov ? d + momentum * buf : buf
// and p = p - lr * d.
struct SgdScalars {
  float lr, weight_decay, momentum, one_minus_dampening;
  bool nesterov, first;
};
struct SgdArgs {
  SgdScalars k;
  Tensor param, grad, momentum_buffer;  // momentum_buffer f32, undefined when momentum is 0
  StochasticRounding sr;
};
// sum of x^2 over a contiguous tensor, in double, into *out; and x *= factor in place.
// sum_squares adds sum(double(x)^2) into *acc, a double in x's device memory, so that
// the squares of many tensors sum on the device (Note [Host reads]).
struct SumSquaresArgs {
  Tensor x;
  double* acc = nullptr;
  Tensor workspace;  // f32 of 2 x sum_squares_workspace_doubles, temporary, or undefined
};
// x *= factor. With clip_sum_squares set (a double in x's device memory) the factor is
// instead the global-norm clip's coefficient, computed where the sum is:
// c = max_norm / (sqrt(*clip_sum_squares) + 1e-6) in double, and x is left as it is when c
// is not below 1 or not finite (torch.nn.utils.clip_grad_norm_'s rule, Note [Clipping on
// the device] in optim/clip.cpp).
struct ScaleInPlaceArgs {
  Tensor x;
  float factor = 1;
  const double* clip_sum_squares = nullptr;
  double max_norm = 0;
};

// svd_basis: the first r singular vectors of a (m, n), contiguous in a floating dtype: with
// `left`, out (m, r) = U[:, :r], else out (r, n) = Vh[:r, :] (the right vectors as rows);
// out contiguous, floating; each vector's sign as Note [Singular vector signs] in
// tensor/cpu/svd.h fixes it. GaLore's projection (optim/galore.h). The f32 workspace is
// backend::svd_workspace_floats long (undefined when that is 0, as on a cpu).
struct SvdBasisArgs {
  int64_t m = 0, n = 0, r = 0;
  bool left = true;
  Tensor a, out, workspace;
};

// bitsandbytes' 4-bit blockwise quantization (tensor/quant/four_bit.h). quantize: a (n)
// floating -> packed u8 ((n + 1) / 2), absmax f32 (blocks); with double quantization also
// nested u8 (blocks), absmax2 f32 (ceil(blocks / 256)) and offset f32 (1), and absmax is
// then a temporary the kernel may overwrite. dequantize: the inverse into out (n, floating),
// from absmax or, when nested is defined, from the double-quantized absmaxes.
struct FourBitArgs {
  int64_t n = 0, blocksize = 64;
  bool fp4 = false;
  Tensor a_or_out;  // the values quantized, or the dequantized output
  Tensor packed, absmax;
  Tensor nested, absmax2, offset;  // double quantization, or undefined
};

// Q-GaLore's int8 group quantization (tensor/quant/int8.h, Note [Int8 weights]) of n values
// in groups of group_size (which divides n). quantize: codes, scales and zeros from a_or_out,
// rounded stochastically from sr's Philox stream when sr.enabled, else to nearest.
// dequantize: a_or_out from codes, scales and zeros.
struct Int8Args {
  int64_t n = 0, group_size = 256;
  Tensor a_or_out;  // (n) floating: the values quantized, or the dequantized output
  Tensor codes;     // (n) u8
  Tensor scales;    // (n / group_size) f32
  Tensor zeros;     // (n / group_size) u8
  StochasticRounding sr;
};

// Reads of a 4-bit (rows, cols) weight without dequantizing all of it. embedding_4bit: out
// (n, cols) floating = the rows named by ids (n, i32 or i64; the kernel checks each is in
// [0, rows)). linear_4bit: out (m, rows) f32 = x (m, cols) f32 times the weight transposed,
// with staging f32 (four_bit_matvec_staging floats) as scratch. absmax f32 (blocks) as in
// FourBitArgs; with nested defined, embedding_4bit's is a temporary the kernel fills
// first, and linear_4bit's is undefined (the kernel reads the nested codes in place).
// Rows of x staged in whole 128-value groups (Note [Nibbles in place]).
inline int64_t four_bit_matvec_staging(int64_t m, int64_t cols) { return m * (cols + 128); }
struct FourBitReadArgs {
  int64_t rows = 0, cols = 0, blocksize = 64;
  bool fp4 = false;
  Tensor packed, absmax;
  Tensor nested, absmax2, offset;
  Tensor ids_or_x, out, staging;
};

// bitsandbytes' Adam with 8-bit blockwise state (Note [Adam8bit kernel] in
// tensor/cpu/adam8bit.cpp), or its 32-bit kernel for small tensors. The scalars, rounded to
// f32 (t is the parameter's step):
//   step_size = (-lr * c2) / c1, c1 = 1 - beta1^t, c2 = sqrt(1 - beta2^t)
//   eps_c2 = eps * c2, decay = 1 - lr * weight_decay (applied after the step when
//   weight_decay > 0)
inline constexpr int64_t kAdam8bitBlock = 256;  // elements per absmax, as bitsandbytes'
struct Adam8bitScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, step_size, eps_c2, decay;
  bool weight_decay;
};
struct Adam8bitArgs {
  Adam8bitScalars k;
  Tensor param, grad;       // (n) contiguous, any floating dtype
  Tensor state1, state2;    // u8 (n) codes, or f32 of param's shape (the 32-bit kernel)
  Tensor absmax1, absmax2;  // f32 (ceil(n / 256)); undefined with f32 states
  StochasticRounding sr;
};

// Adafactor's fused update (tensor/cpu/adafactor.h gives the two variants' arithmetic). A
// factored parameter is viewed as (batch, rows, cols) over its last two dims, with `row`
// (batch * rows) and `col` (batch * cols) f32 factors; any other has `full`, f32 like the
// parameter. exp_avg (f32 like the parameter) is HF's optional first moment.
enum class AdafactorVariant : uint8_t { torch, hf };
struct AdafactorScalars {
  AdafactorVariant variant = AdafactorVariant::torch;
  // torch: alpha = max(eps2, rms(p)) * rho; p *= decay; EMA weight one_minus_beta2;
  //        variance floor eps1; clipping threshold d.
  // Scalars that only scale the step are double, as torch's Python computes them.
  double rho = 0, eps2 = 0, d = 1;
  float eps1 = 0, decay = 1, one_minus_beta2 = 1;
  // hf: lr_t = (scale_parameter ? max(eps_scale, rms(p)) : 1) * rel_step; EMA beta2t;
  //     eps0 added to g^2; clip_threshold; beta1 < 0 when there is no first moment.
  double rel_step = 0, eps_scale = 0, clip_threshold = 1, weight_decay = 0;
  float beta2t = 0, eps0 = 0, beta1 = -1;
  bool scale_parameter = false;
};
struct AdafactorArgs {
  AdafactorScalars k;
  Tensor param, grad;  // contiguous, any floating dtype
  Tensor row, col;     // f32 factors, or undefined
  Tensor full;         // f32 second moment of an unfactored parameter, or undefined
  Tensor exp_avg;      // f32, or undefined
  int64_t batch = 1, rows = 1, cols = 1;  // (1, 1, n) for an unfactored parameter
  Tensor workspace;  // adafactor_workspace_doubles(batch, rows, cols) doubles, temporary
  StochasticRounding sr;
};
// The doubles of Adafactor's workspace: a partial sum per row, one per column, and each
// batch's mean row factor.
inline int64_t adafactor_workspace_doubles(int64_t batch, int64_t rows, int64_t cols) {
  return batch * rows + batch * cols + batch;
}

// APOLLO's update of one projected (rows, cols) parameter (optim/apollo.h). `low` is its
// gradient R projected on the smaller side: (rows, rank) when `right` (R = G P^T; its channels
// are the rows of G) or (rank, cols) (R = P G; the channels are the columns), in grad's dtype.
// With sums of squares in double and ||x_c|| the norm of channel c's rank values:
//   m = m beta1 + R (1 - beta1),  v = v beta2 + R^2 (1 - beta2),  N = m / (sqrt(v) + eps)
//   s_c = ||N_c|| / (||R_c|| + 1e-8), rounded to f32, per channel; tensor_wise: one
//         s = ||N|| / (||R|| + 1e-8) for every element
//   n = ||G s||;  l = first ? 1 : max(n / (norm + 1e-8), growth) / growth;  norm = n / l
//   p = p - coef (s_c g), coef = step / l rounded to f32;  then p = p * decay when
//   weight_decay
// norm (one f32) is the limiter's state: the scaled gradient's norm of the previous step.
struct ApolloScalars {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps;
  double step;    // lr sqrt(1 - beta2^t) / (1 - beta1^t) sqrt(scale)
  double growth;  // the norm-growth limit (Fira's gamma)
  float decay;    // 1 - lr weight_decay
  bool weight_decay, right, tensor_wise, first;
};
struct ApolloArgs {
  ApolloScalars k;
  int64_t rows = 0, cols = 0, rank = 0;
  Tensor param, grad;          // (rows, cols), contiguous, any floating dtypes
  Tensor low;                  // (rows, rank) or (rank, cols), contiguous, grad's dtype
  Tensor exp_avg, exp_avg_sq;  // f32, low's shape
  Tensor norm;                 // f32 (1)
  Tensor workspace;            // apollo_workspace(rows, cols, right).doubles, temporary
  StochasticRounding sr;
};

}  // namespace fitgrad::backend
