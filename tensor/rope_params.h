// What RoPE rotates by: the base theta and a context-extension scaling of the frequencies,
// as a Hugging Face config's rope_theta and rope_scaling (or transformers 5's rope_parameters)
// give them. A plain header: the CUDA table kernel computes the same frequencies on the card.
//
// Note [RoPE frequencies]
// Pair i of a head of size D rotates by position * f_i. The base frequency is
// b_i = theta^(-2i/D). The scalings, with transformers' formulas (modeling_rope_utils):
//   none    f_i = b_i;
//   linear  f_i = b_i / factor (position interpolation);
//   llama3  (Llama 3.1 and 3.2) with the wavelength w_i = 2 pi / b_i, the old context L =
//           original_max_position_embeddings, low and high frequency factors lo < hi:
//           w_i < L / hi: f_i = b_i (high frequencies kept); w_i > L / lo: f_i = b_i / factor;
//           between them f_i = (1 - s) b_i / factor + s b_i with s = (L / w_i - lo) / (hi - lo).
//   longrope (Phi-3, "su" in older configs) f_i = b_i / r_i, with r the short_factor list
//           while the sequence (position_offset + T, the KV cache included) fits in L =
//           original_max_position_embeddings and the long_factor list beyond it (transformers
//           4.46's Phi3LongRoPEScaledRotaryEmbedding chooses so on every forward); cos and
//           sin are multiplied by the attention factor, sqrt(1 + ln(M / L) / ln L) for
//           M = max_position_embeddings > L (else 1), or the config's attention_factor.
//   dynamic (NTK) with M = original_max_position_embeddings (else max_position_embeddings) and
//           L = max(M, position_offset + T): f_i = b'^(-2i/D) with the base
//           b' = theta (factor L / M - (factor - 1))^(D / (D - 2)), recomputed for each call
//           as transformers does per forward (it also keeps the largest L it has seen);
//   yarn    with M as above, fast and slow rotation counts beta_fast (32) and beta_slow (1):
//           the correction dims c(r) = D ln(M / (2 pi r)) / (2 ln theta), low = max(floor(
//           c(beta_fast)), 0), high = min(ceil(c(beta_slow)), D - 1), the ramp
//           g_i = clamp((i - low) / (high - low), 0, 1) and f_i = b_i ((1 - g_i) + g_i / factor);
//           cos and sin are multiplied by attention_factor (0.1 ln factor + 1 by default).
// transformers computes b_i in float32 and the angles in float32; fitgrad in double, so its
// angles are the exact ones rounded once (within float32's rounding of transformers').
// Only longrope and yarn scale the attention (the others' attention factor is 1).
#pragma once

#include <cmath>
#include <cstdint>

#ifdef __CUDACC__
#define FG_ROPE_HD __host__ __device__
#else
#define FG_ROPE_HD
#endif

namespace fitgrad {

struct RopeScaling {
  enum class Type : int { none, linear, llama3, longrope, dynamic, yarn };
  static constexpr int kMaxPairs = 128;  // longrope's lists: head dims up to 256
  Type type = Type::none;
  double factor = 1.0;
  double low_freq_factor = 1.0;           // llama3
  double high_freq_factor = 4.0;          // llama3
  double original_max_position = 8192.0;  // llama3, longrope, dynamic, yarn: the old context
  double beta_fast = 32, beta_slow = 1;   // yarn
  // position_offset + T, set by the rope op: longrope's list and dynamic NTK's base follow it
  double sequence = 0;
  // longrope: one divisor per pair for each context, and the factor cos and sin are scaled by.
  float short_factor[kMaxPairs] = {};
  float long_factor[kMaxPairs] = {};
  int32_t pairs = 0;
  double attention_factor = 1.0;
  bool operator==(const RopeScaling&) const = default;
};

struct RopeParams {
  double theta = 10000.0;
  RopeScaling scaling;
  RopeParams() = default;
  RopeParams(double base, RopeScaling s = {}) : theta(base), scaling(s) {}  // NOLINT: a base alone
};

// f_i for pair i of d (Note [RoPE frequencies]).
FG_ROPE_HD inline double rope_frequency(int64_t i, int64_t d, const RopeParams& p) {
  const double base = pow(p.theta, -double(2 * i) / double(d));
  const RopeScaling& s = p.scaling;
  if (s.type == RopeScaling::Type::linear) return base / s.factor;
  if (s.type == RopeScaling::Type::longrope)
    return base /
           double(s.sequence > s.original_max_position ? s.long_factor[i] : s.short_factor[i]);
  if (s.type == RopeScaling::Type::dynamic) {
    const double m = s.original_max_position, l = s.sequence > m ? s.sequence : m;
    const double b = p.theta * pow(s.factor * l / m - (s.factor - 1), double(d) / double(d - 2));
    return pow(b, -double(2 * i) / double(d));
  }
  if (s.type == RopeScaling::Type::yarn) {
    const auto dim_of = [&](double rotations) {
      return double(d) * log(s.original_max_position / (rotations * 6.283185307179586)) /
             (2 * log(p.theta));
    };
    const double low0 = floor(dim_of(s.beta_fast)), high0 = ceil(dim_of(s.beta_slow));
    const double low = low0 > 0 ? low0 : 0, high_c = high0 < double(d - 1) ? high0 : double(d - 1);
    const double high = high_c == low ? high_c + 0.001 : high_c;
    double ramp = (double(i) - low) / (high - low);
    ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
    return base * ((1 - ramp) + ramp / s.factor);
  }
  if (s.type != RopeScaling::Type::llama3) return base;
  const double wavelength = 6.283185307179586 / base;
  if (wavelength < s.original_max_position / s.high_freq_factor) return base;
  if (wavelength > s.original_max_position / s.low_freq_factor) return base / s.factor;
  const double smooth = (s.original_max_position / wavelength - s.low_freq_factor) /
                        (s.high_freq_factor - s.low_freq_factor);
  return (1 - smooth) * base / s.factor + smooth * base;
}

// What cos and sin are multiplied by (Note [RoPE frequencies]).
FG_ROPE_HD inline double rope_attention_factor(const RopeParams& p) {
  return p.scaling.type == RopeScaling::Type::longrope || p.scaling.type == RopeScaling::Type::yarn
             ? p.scaling.attention_factor
             : 1.0;
}

}  // namespace fitgrad
