// GRPO's advantages, loss, gradient and statistics of grpo_loss.h, written out in double as
// TRL 1.16's GRPOTrainer computes them, and the node that hands the gradient to the
// per-token log-probabilities.
#include "train/objectives/grpo_loss.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "autograd/grad_mode.h"
#include "autograd/lambda_node.h"
#include "autograd/tape.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"

namespace fitgrad::train {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// torch.nanmean and TRL's nanstd (the sample standard deviation, NaN for fewer than two
// values) of the values of x that are not NaN. TRL's Bessel factor count / (count - 1) is a
// division of integer tensors, which torch makes in float32: so it is rounded here too.
double nanmean(std::span<const double> x) {
  double sum = 0;
  int64_t n = 0;
  for (double v : x)
    if (!std::isnan(v)) sum += v, ++n;
  return n ? sum / double(n) : kNaN;
}
double nanstd(std::span<const double> x) {
  const double mean = nanmean(x);
  double sq = 0;
  int64_t n = 0;
  for (double v : x)
    if (!std::isnan(v)) sq += (v - mean) * (v - mean), ++n;
  const auto bessel = double(float(double(n) / double(n - 1)));
  return n > 1 ? std::sqrt(sq / double(n) * bessel) : kNaN;
}

// d P / d r for P = -min(r A, clamp(r, lo, hi) A), with torch's rules: min splits a tie's
// gradient in half, clamp passes it within [lo, hi] bounds included.
double policy_grad(double r, double a, double lo, double hi) {
  const double c = std::clamp(r, lo, hi);
  const double pass = r >= lo && r <= hi ? 1.0 : 0.0;
  const double first = r * a, second = c * a;
  if (first < second) return -a;
  if (first > second) return -a * pass;
  return -0.5 * a - 0.5 * a * pass;
}

}  // namespace

GrpoLossType parse_grpo_loss_type(std::string_view name) {
  if (name == "grpo") return GrpoLossType::grpo;
  if (name == "bnpo") return GrpoLossType::bnpo;
  if (name == "dr_grpo") return GrpoLossType::dr_grpo;
  if (name == "dapo") return GrpoLossType::dapo;
  throw Error(fmt::format("[grpo] --loss_type {} is none of grpo, bnpo, dr_grpo, dapo", name));
}

ImportanceSampling parse_importance_sampling(std::string_view name) {
  if (name == "token") return ImportanceSampling::token;
  if (name == "sequence") return ImportanceSampling::sequence;
  throw Error(
      fmt::format("[grpo] --importance_sampling_level {} is neither token nor sequence", name));
}

RewardScaling parse_reward_scaling(std::string_view name) {
  if (name == "group") return RewardScaling::group;
  if (name == "batch") return RewardScaling::batch;
  if (name == "none") return RewardScaling::none;
  throw Error(fmt::format("[grpo] --scale_rewards {} is none of group, batch, none", name));
}

GrpoAdvantages grpo_advantages(const GrpoConfig& config, std::span<const double> rewards,
                               int64_t functions) {
  const int64_t g = config.num_generations;
  FG_CHECK(functions >= 1 && rewards.size() % size_t(functions) == 0,
           "[grpo] {} rewards do not split into {} reward functions", rewards.size(), functions);
  const auto b = int64_t(rewards.size()) / functions;
  FG_CHECK(g >= 1 && b % g == 0, "[grpo] {} completions are not groups of --num_generations {}", b,
           g);
  std::vector<double> weights = config.reward_weights;
  if (weights.empty()) weights.assign(size_t(functions), 1.0);
  FG_CHECK(int64_t(weights.size()) == functions,
           "[grpo] {} --reward_weights for {} reward functions", weights.size(), functions);
  GrpoAdvantages out;
  std::vector<double> total(static_cast<size_t>(b));  // (B): sum_k w_k r_k, NaN where none scored
  for (int64_t i = 0; i < b; ++i) {
    double sum = 0;
    bool scored = false;
    for (int64_t k = 0; k < functions; ++k) {
      const double r = rewards[size_t(i * functions + k)];
      if (!std::isnan(r)) sum += r * weights[size_t(k)], scored = true;
    }
    total[size_t(i)] = scored ? sum : kNaN;
  }
  const std::span<const double> all(total);
  const double batch_std = b > 1 ? nanstd(all) : 0.0;
  out.advantages.resize(size_t(b));
  int64_t zero_std = 0;
  for (int64_t i0 = 0; i0 < b; i0 += g) {
    const auto group = all.subspan(size_t(i0), size_t(g));
    const double mean = nanmean(group);
    double std = 0;
    if (config.scale_rewards == RewardScaling::batch)
      std = batch_std;
    else
      std = g > 1 ? nanstd(group) : 0.0;
    for (int64_t i = i0; i < i0 + g; ++i) {
      double a = total[size_t(i)] - mean;
      if (config.scale_rewards != RewardScaling::none) a /= std + 1e-4;
      out.advantages[size_t(i)] = std::isnan(a) ? 0.0 : a;
      if (std::abs(std) <= 1e-8) ++zero_std;  // torch.isclose(std, 0)
    }
  }
  out.reward_mean = nanmean(all);
  out.reward_std = nanstd(all);
  out.frac_reward_zero_std = double(zero_std) / double(b);
  for (int64_t k = 0; k < functions; ++k) {
    std::vector<double> column(static_cast<size_t>(b));
    for (int64_t i = 0; i < b; ++i) column[size_t(i)] = rewards[size_t(i * functions + k)];
    out.function_mean.push_back(nanmean(column));
    out.function_std.push_back(nanstd(column));
  }
  return out;
}

std::vector<double> grpo_loss_mask(const GrpoConfig& config, std::span<const double> mask,
                                   const std::vector<bool>& truncated) {
  FG_CHECK(!truncated.empty() && mask.size() % truncated.size() == 0,
           "[grpo] a mask of {} positions for {} completions", mask.size(), truncated.size());
  std::vector<double> out(mask.begin(), mask.end());
  if (!config.mask_truncated_completions) return out;
  const size_t t = mask.size() / truncated.size();
  for (size_t b = 0; b < truncated.size(); ++b)
    if (truncated[b]) std::fill_n(out.begin() + ptrdiff_t(b * t), t, 0.0);
  return out;
}

GrpoTerms grpo_terms(const GrpoConfig& cfg, std::span<const double> logp, const GrpoInputs& in) {
  const int64_t nb = in.rows, nt = in.cols;
  const auto n = size_t(nb * nt);
  FG_CHECK(nb >= 1 && nt >= 1 && logp.size() == n && in.mask.size() == n &&
               in.advantages.size() == size_t(nb),
           "[grpo] {} log-probabilities, {} mask values and {} advantages for {} completions of "
           "{} positions",
           logp.size(), in.mask.size(), in.advantages.size(), nb, nt);
  FG_CHECK(in.old_logp.empty() || in.old_logp.size() == n,
           "[grpo] {} old log-probabilities for {} positions", in.old_logp.size(), n);
  FG_CHECK(cfg.beta == 0 || in.ref_logp.size() == n,
           "[grpo] beta {} needs the reference's log-probabilities: {} for {} positions", cfg.beta,
           in.ref_logp.size(), n);
  FG_CHECK(in.entropy.empty() || in.entropy.size() == n, "[grpo] {} entropies for {} positions",
           in.entropy.size(), n);
  const double lo = 1 - cfg.epsilon, hi = 1 + cfg.epsilon_high.value_or(cfg.epsilon);
  const bool seq = cfg.importance_sampling_level == ImportanceSampling::sequence;
  const auto at = [nt](int64_t b, int64_t t) { return size_t(b * nt + t); };
  const auto log_ratio = [&](size_t i) {
    return in.old_logp.empty() ? 0.0 : logp[i] - in.old_logp[i];
  };

  std::vector<double> count(size_t(nb), 0.0);  // (B): sum_t m
  double total = 0;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t t = 0; t < nt; ++t) count[size_t(b)] += in.mask[at(b, t)];
    total += count[size_t(b)];
  }
  // The ratio of each token (token) or completion (sequence).
  std::vector<double> ratio(seq ? size_t(nb) : n);
  for (int64_t b = 0; b < nb; ++b) {
    if (seq) {
      double s = 0;
      for (int64_t t = 0; t < nt; ++t) s += log_ratio(at(b, t)) * in.mask[at(b, t)];
      ratio[size_t(b)] = std::exp(s / std::max(count[size_t(b)], 1.0));
    } else {
      for (int64_t t = 0; t < nt; ++t) ratio[at(b, t)] = std::exp(log_ratio(at(b, t)));
    }
  }
  // d loss / d (per-token loss) of one trained token of completion b.
  const auto weight = [&](int64_t b) {
    switch (cfg.loss_type) {
      case GrpoLossType::grpo: return 1 / std::max(count[size_t(b)], 1.0) / double(nb);
      case GrpoLossType::bnpo: return 1 / std::max(total, 1.0);
      case GrpoLossType::dr_grpo: return 1 / double(nb * cfg.max_completion_length);
      case GrpoLossType::dapo:
        return double(in.steps_per_generation) / std::max(in.num_items_in_batch, 1.0);
    }
    return 0.0;
  };
  FG_CHECK(cfg.loss_type != GrpoLossType::dapo || in.steps_per_generation >= 1,
           "[grpo] dapo needs steps_per_generation >= 1, got {}", in.steps_per_generation);

  GrpoTerms out;
  out.grad.assign(n, 0.0);
  std::vector<double> dratio(ratio.size(), 0.0);  // d loss / d ratio
  // The statistics' sums: flags per token (or per completion), KL and entropy per token.
  double low = 0, high = 0, region = 0, kl_sum = 0, entropy_sum = 0;
  double low_min = kNaN, high_max = kNaN;
  // TRL's global_masked_mean takes a (B, 1) value as one per completion, unmasked.
  const bool per_row_flags = seq || nt == 1;
  for (int64_t b = 0; b < nb; ++b) {
    const double a = in.advantages[size_t(b)], w = weight(b);
    double row_low = 0, row_high = 0;
    for (int64_t t = 0; t < nt; ++t) {
      const size_t i = at(b, t);
      const double m = in.mask[i];
      const size_t ri = seq ? size_t(b) : i;
      const double r = ratio[ri];
      const bool is_low = r < lo && a<0, is_high = r> hi && a > 0;
      if (!per_row_flags) {
        low += m * is_low;
        high += m * is_high;
        region += m * (is_low || is_high);
        row_low += m * is_low;
        row_high += m * is_high;
      }
      if (!in.entropy.empty()) entropy_sum += m * in.entropy[i];
      if (m == 0) continue;
      const double policy = -std::min(r * a, std::clamp(r, lo, hi) * a);
      double per_token = policy;
      dratio[ri] += w * m * policy_grad(r, a, lo, hi);
      if (cfg.beta != 0) {
        const double d = in.ref_logp[i] - logp[i];
        const double k3 = std::exp(d) - d - 1, dk3 = 1 - std::exp(d);  // dk3: d k3 / d logp
        const double scale = cfg.kl_bias_correction ? r : 1.0;
        per_token += cfg.beta * k3 * scale;
        kl_sum += m * k3 * scale;
        out.grad[i] += w * m * cfg.beta * dk3 * scale;
        if (cfg.kl_bias_correction) dratio[ri] += w * m * cfg.beta * k3;
      }
      out.loss += w * m * per_token;
    }
    if (per_row_flags) {
      const double r = ratio[seq ? size_t(b) : at(b, 0)];
      const bool is_low = r < lo && a<0, is_high = r> hi && a > 0;
      low += is_low;
      high += is_high;
      region += is_low || is_high;
      row_low = is_low;
      row_high = is_high;
    } else {
      // masked_seq_mean: NaN for a completion without trained tokens (skipped by nanmin).
      row_low /= count[size_t(b)];
      row_high /= count[size_t(b)];
    }
    if (!std::isnan(row_low)) low_min = std::isnan(low_min) ? row_low : std::min(low_min, row_low);
    if (!std::isnan(row_high))
      high_max = std::isnan(high_max) ? row_high : std::max(high_max, row_high);
  }
  // Through the ratio: d r_bt / d logp_bt = r_bt; d r_b / d logp_bt = r_b m_bt / max(sum m, 1).
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t t = 0; t < nt; ++t) {
      const size_t i = at(b, t);
      out.grad[i] +=
          seq ? dratio[size_t(b)] * ratio[size_t(b)] * in.mask[i] / std::max(count[size_t(b)], 1.0)
              : dratio[i] * ratio[i];
    }
  const double flags_over = per_row_flags ? double(nb) : std::max(total, 1.0);
  out.stats.clip_low_mean = low / flags_over;
  out.stats.clip_high_mean = high / flags_over;
  out.stats.clip_region_mean = region / flags_over;
  out.stats.clip_low_min = low_min;
  out.stats.clip_high_max = high_max;
  out.stats.kl = cfg.beta != 0 ? kl_sum / std::max(total, 1.0) : kNaN;
  out.stats.entropy = in.entropy.empty() ? kNaN : entropy_sum / std::max(total, 1.0);
  return out;
}

Tensor grpo_loss(const Tensor& logp, const GrpoInputs& inputs, const GrpoConfig& config,
                 GrpoStats* stats) {
  FG_CHECK(logp.dim() == 2 && logp.dtype() == DType::f32 && logp.size(0) == inputs.rows &&
               logp.size(1) == inputs.cols,
           "[grpo] logp must be ({}, {}) f32, got {} {}", inputs.rows, inputs.cols,
           shape_str(logp.shape()), dtype_name(logp.dtype()));
  const Device device = logp.device();
  std::vector<double> grad;
  Tensor loss;
  {
    const autograd::ForwardScope scope(autograd::requires_grad(logp));
    if (device.has_bytes()) {
      const std::vector<double> values = logp.to_vector<double>();
      GrpoTerms t = grpo_terms(config, values, inputs);
      if (stats) *stats = t.stats;
      grad = std::move(t.grad);
      loss = Tensor::from_vector(std::vector<float>{float(t.loss)}, {}, DType::f32, device);
    } else {
      grad.assign(size_t(logp.numel()), 0.0);
      loss = Tensor::empty({}, DType::f32, device);
    }
  }
  if (!autograd::needs_record({&logp})) return loss;
  const Shape shape = logp.shape();
  auto node = autograd::make_node(
      "grpo_loss", [grad, shape, device](autograd::Node&, std::vector<Tensor>& g) {
        const Tensor d = device.has_bytes()
                             ? Tensor::from_vector(std::vector<float>(grad.begin(), grad.end()),
                                                   shape, DType::f32, device)
                             : Tensor::empty(shape, DType::f32, device);
        return std::vector<Tensor>{ops::mul(d, g[0])};
      });
  autograd::record(node, {&logp}, {&loss});
  return loss;
}

}  // namespace fitgrad::train
