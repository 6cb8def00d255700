// The preference losses of preference_loss.h, their gradients written out by hand, and the
// autograd node that hands those gradients to the NLLs.
#include "train/preference_loss.h"

#include <fmt/format.h>

#include <cmath>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/lambda_node.h"
#include "nn/lora.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"
#include "tensor/ops/elementwise.h"

namespace fitgrad::train {
namespace {

// log sigmoid(x) and sigmoid(x), stable for any sign of x.
double log_sigmoid(double x) {
  return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x));
}
double sigmoid(double x) {
  return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
}
// log(1 - e^x) for x < 0, branching at -ln 2 as Maechler's note advises.
double log1mexp(double x) {
  return x < -M_LN2 ? std::log1p(-std::exp(x)) : std::log(-std::expm1(x));
}

// Note [A sure answer's odds]
// ORPO's odds of an answer, p / (1 - p) with log p = a its mean log-probability, are infinite
// when a = 0: an answer the model is sure of, which float32 sums reach (each token's NLL
// rounds to 0). TRL computes log1p(-exp(a)) there and gets -inf, and a NaN gradient. Here a is
// clamped at -1e-9 (odds e^20.7), and a clamped average passes no gradient, as torch.clamp's
// does: the loss stays finite and the other terms still train.
constexpr double kMaxMeanLogProb = -1e-9;

}  // namespace

Objective parse_objective(std::string_view name) {
  if (name == "dpo") return Objective::dpo;
  if (name == "orpo") return Objective::orpo;
  throw Error(fmt::format("[preference] {} is none of the pair losses dpo, orpo", name));
}

DpoLoss parse_dpo_loss(std::string_view name) {
  if (name == "sigmoid") return DpoLoss::sigmoid;
  if (name == "hinge") return DpoLoss::hinge;
  if (name == "ipo") return DpoLoss::ipo;
  throw Error(fmt::format("[train] --loss_type {} is none of sigmoid, hinge, ipo", name));
}

void PreferenceStats::add(const PreferenceStats& o) {
  pairs += o.pairs;
  reward_chosen += o.reward_chosen;
  reward_rejected += o.reward_rejected;
  accuracy += o.accuracy;
  margin += o.margin;
  logps_chosen += o.logps_chosen;
  logps_rejected += o.logps_rejected;
  nll += o.nll;
  log_odds_ratio += o.log_odds_ratio;
  log_odds_chosen += o.log_odds_chosen;
  micro_batches += o.micro_batches;
}

PreferenceTerms preference_terms(const PreferenceConfig& cfg, std::span<const double> nll,
                                 std::span<const double> ref_nll, std::span<const int64_t> counts) {
  FG_CHECK(nll.size() % 2 == 0 && !nll.empty() && counts.size() == nll.size(),
           "[preference] {} NLLs and {} counts: expected 2B of each", nll.size(), counts.size());
  const size_t B = nll.size() / 2;
  const bool dpo = cfg.objective == Objective::dpo;
  FG_CHECK(!dpo || ref_nll.size() == nll.size(), "[preference] {} reference NLLs for {} rows",
           ref_nll.size(), nll.size());
  const double beta = cfg.beta, eps = cfg.label_smoothing, inv_b = 1.0 / double(B);
  PreferenceTerms t;
  t.grad.assign(nll.size(), 0.0);
  t.stats.pairs = int64_t(B);
  t.stats.micro_batches = 1;
  int64_t chosen_tokens = 0;
  for (size_t i = 0; i < B; ++i) chosen_tokens += counts[i];
  for (size_t i = 0; i < B; ++i) {
    const size_t c = i, r = B + i;
    FG_CHECK(counts[c] >= 1 && counts[r] >= 1,
             "[preference] pair {} has an answer without a target", i);
    const double pi_c = -nll[c], pi_r = -nll[r];
    const auto n_c = double(counts[c]), n_r = double(counts[r]);
    double reward_c = 0, reward_r = 0;
    if (dpo) {
      const double lr_c = pi_c + ref_nll[c], lr_r = pi_r + ref_nll[r];  // pi - ref
      reward_c = beta * lr_c;
      reward_r = beta * lr_r;
      double dd = 0;  // d loss_i / d d; d d / d nll_c = -1, d d / d nll_r = +1
      double dc = -1, dr = 1;
      if (cfg.loss_type == DpoLoss::sigmoid) {
        const double z = beta * (lr_c - lr_r);
        t.loss += -(1 - eps) * log_sigmoid(z) - eps * log_sigmoid(-z);
        dd = beta * (-(1 - eps) * sigmoid(-z) + eps * sigmoid(z));
      } else if (cfg.loss_type == DpoLoss::hinge) {
        const double h = 1 - beta * (lr_c - lr_r);
        t.loss += std::max(0.0, h);
        dd = h > 0 ? -beta : 0.0;
      } else {  // ipo, over per-token averages
        const double d = lr_c / n_c - lr_r / n_r - 1 / (2 * beta);
        t.loss += d * d;
        dd = 2 * d;
        dc = -1 / n_c;
        dr = 1 / n_r;
      }
      t.grad[c] = inv_b * dd * dc;
      t.grad[r] = inv_b * dd * dr;
    } else {
      // Note [A sure answer's odds]: the averages clamped below 0, no gradient through a clamp.
      const double mean_c = pi_c / n_c, mean_r = pi_r / n_r;
      const double a_c = std::min(mean_c, kMaxMeanLogProb), a_r = std::min(mean_r, kMaxMeanLogProb);
      const double log_odds = (a_c - a_r) - (log1mexp(a_c) - log1mexp(a_r));
      const double ratio = log_sigmoid(log_odds);
      t.loss += -beta * ratio;
      const double dl = -beta * sigmoid(-log_odds);  // d (-beta ratio) / d log_odds
      // d log_odds / d a_c = 1 / (1 - e^{a_c}); / d a_r = -1 / (1 - e^{a_r}); d a / d nll = -1/n.
      const bool free_c = mean_c < kMaxMeanLogProb, free_r = mean_r < kMaxMeanLogProb;
      t.grad[c] = free_c ? inv_b * dl * (-1 / std::expm1(a_c)) * (-1 / n_c) : 0.0;
      t.grad[r] = free_r ? inv_b * dl * (1 / std::expm1(a_r)) * (-1 / n_r) : 0.0;
      t.grad[c] += 1.0 / double(chosen_tokens);  // the chosen answers' NLL term
      reward_c = beta * a_c;
      reward_r = beta * a_r;
      t.stats.log_odds_ratio += ratio;
      t.stats.log_odds_chosen += log_odds;
    }
    t.stats.reward_chosen += reward_c;
    t.stats.reward_rejected += reward_r;
    t.stats.accuracy += reward_c > reward_r ? 1 : 0;
    t.stats.margin += reward_c - reward_r;
    t.stats.logps_chosen += dpo ? pi_c : pi_c / n_c;
    t.stats.logps_rejected += dpo ? pi_r : pi_r / n_r;
  }
  t.loss *= inv_b;
  if (!dpo) {
    double chosen_nll = 0;
    for (size_t i = 0; i < B; ++i) chosen_nll += nll[i];
    t.stats.nll = chosen_nll / double(chosen_tokens);
    t.loss += t.stats.nll;
  }
  return t;
}

Tensor host_loss_of_nll(
    const Tensor& nll, const char* name,
    const std::function<std::pair<double, std::vector<double>>(const std::vector<double>&)>&
        terms) {
  FG_CHECK(nll.dim() == 1 && nll.dtype() == DType::f32, "[{}] nll must be (n) f32", name);
  const Device device = nll.device();
  std::vector<double> grad;
  Tensor loss;
  {
    const autograd::ForwardScope scope(autograd::requires_grad(nll));
    if (device.has_bytes()) {
      auto [value, g] = terms(nll.to_vector<double>());
      grad = std::move(g);
      loss = Tensor::from_vector(std::vector<float>{float(value)}, {}, DType::f32, device);
    } else {
      grad.assign(size_t(nll.numel()), 0.0);
      loss = Tensor::empty({}, DType::f32, device);
    }
  }
  if (!autograd::needs_record({&nll})) return loss;
  auto node = autograd::make_node(name, [grad, device](autograd::Node&, std::vector<Tensor>& g) {
    const auto n = int64_t(grad.size());
    const Tensor d = device.has_bytes()
                         ? Tensor::from_vector(std::vector<float>(grad.begin(), grad.end()), {n},
                                               DType::f32, device)
                         : Tensor::empty({n}, DType::f32, device);
    return std::vector<Tensor>{ops::mul(d, g[0])};
  });
  autograd::record(node, {&nll}, {&loss});
  return loss;
}

Tensor preference_loss(const Tensor& nll, const std::vector<double>& ref_nll,
                       const std::vector<int64_t>& counts, const PreferenceConfig& config,
                       PreferenceStats* stats) {
  FG_CHECK(nll.dim() == 1 && nll.dtype() == DType::f32, "[preference] nll must be (2B) f32");
  return host_loss_of_nll(nll, "preference_loss", [&](const std::vector<double>& values) {
    PreferenceTerms t = preference_terms(config, values, ref_nll, counts);
    if (stats) stats->add(t.stats);
    return std::pair{t.loss, std::move(t.grad)};
  });
}

Tensor answer_nll(const nn::CausalLM& model, const MicroBatch& batch) {
  const nn::PackedRows* packed = batch.packed.segments.defined() ? &batch.packed : nullptr;
  return autograd::sequence_nll(model.forward(batch.ids, packed), batch.targets,
                                batch.spans);  // (2B)
}

std::vector<double> reference_nll(nn::CausalLM& model, const MicroBatch& batch) {
  const bool training = model.training();
  model.eval();
  std::vector<double> ref;
  {
    const autograd::NoGradGuard no_grad;
    const nn::AdaptersOff reference;
    const LabelScope label("reference");
    const Tensor nll = answer_nll(model, batch);
    ref = nll.device().has_bytes() ? nll.to_vector<double>()
                                   : std::vector<double>(size_t(nll.numel()), 0.0);
  }
  model.train(training);
  return ref;
}

Tensor preference_objective(nn::CausalLM& model, const MicroBatch& batch,
                            const PreferenceConfig& config, PreferenceStats* stats,
                            nn::CausalLM* reference) {
  const auto answers = int64_t(batch.row_targets.size());
  FG_CHECK(batch.ids.dim() == 2 && answers % 2 == 0 && answers > 0 &&
               (batch.spans.empty() ? batch.ids.size(0) == answers
                                    : int64_t(batch.spans.size()) == answers),
           "[preference] a batch of B pairs has 2B answers, each with its target count and its "
           "rows or span; got {} counts, {} spans, {} rows",
           answers, batch.spans.size(), batch.ids.dim() == 2 ? batch.ids.size(0) : -1);
  FG_CHECK(batch.ref_nll.empty() || int64_t(batch.ref_nll.size()) == answers,
           "[preference] {} precomputed reference values for {} answers", batch.ref_nll.size(),
           answers);
  std::vector<double> ref_nll = batch.ref_nll;
  if (config.objective == Objective::dpo && ref_nll.empty())
    ref_nll = reference_nll(reference ? *reference : model, batch);
  const Tensor nll = answer_nll(model, batch);
  const LabelScope label("loss");
  return preference_loss(nll, ref_nll, batch.row_targets, config, stats);
}

}  // namespace fitgrad::train
