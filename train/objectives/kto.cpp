// KTO's loss, its gradient written out by hand, its statistics and its factory (kto.h).
#include "train/objectives/kto.h"

#include <fmt/format.h>

#include <cmath>

#include "tensor/error.h"
#include "tensor/memory/scope.h"
#include "train/preference_loss.h"

namespace fitgrad::train {
namespace {

double sigmoid(double x) {
  return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x));
}

}  // namespace

KtoLoss parse_kto_loss(std::string_view name) {
  if (name == "kto") return KtoLoss::kto;
  if (name == "apo_zero_unpaired") return KtoLoss::apo_zero_unpaired;
  throw Error(fmt::format("[train] --loss_type {} is none of KTO's kto, apo_zero_unpaired", name));
}

KtoTerms kto_terms(const KtoConfig& cfg, std::span<const double> nll,
                   std::span<const double> ref_nll, std::span<const uint8_t> labels) {
  const size_t B = labels.size();
  FG_CHECK(B > 0 && nll.size() == 2 * B && ref_nll.size() == 2 * B,
           "[kto] {} NLLs and {} reference NLLs for {} labels: expected 2B of each for B examples",
           nll.size(), ref_nll.size(), B);
  KtoTerms t;
  t.grad.assign(2 * B, 0.0);
  if (cfg.loss_type == KtoLoss::kto) {
    double sum = 0;  // of pi' - ref' over the mismatched rows
    for (size_t i = B; i < 2 * B; ++i) sum += ref_nll[i] - nll[i];
    t.kl = std::max(0.0, sum / double(B));
  }
  const double beta = cfg.beta, inv_b = 1.0 / double(B);
  double reward[2] = {0, 0}, logps[2] = {0, 0};  // [undesirable, desirable]
  int64_t count[2] = {0, 0};
  for (size_t i = 0; i < B; ++i) {
    const bool desirable = labels[i] != 0;
    const double r = ref_nll[i] - nll[i];  // pi - ref
    // The loss is 1 - sigmoid(z): z = beta (r - kl) for a desirable example, beta (kl - r) for
    // an undesirable one (kl = 0 for apo_zero_unpaired, whose undesirable sigmoid(beta r) is
    // 1 - sigmoid(-beta r)). d/dz = -sigmoid(z) sigmoid(-z); dz/dr = +-beta; dr/dnll = -1.
    const double z = desirable ? beta * (r - t.kl) : beta * (t.kl - r);
    const double w = desirable ? cfg.desirable_weight : cfg.undesirable_weight;
    t.loss += w * (1 - sigmoid(z));
    const double dz_dr = desirable ? beta : -beta;
    t.grad[i] = inv_b * w * sigmoid(z) * sigmoid(-z) * dz_dr;
    reward[desirable] += beta * r;
    logps[desirable] += -nll[i];
    ++count[desirable];
  }
  t.loss *= inv_b;
  t.metrics.add("kl", t.kl);
  const char* names[2] = {"rejected", "chosen"};
  for (int k : {1, 0}) {
    const bool any = count[k] > 0;
    const double n = any ? double(count[k]) : 1.0;
    t.metrics.add(fmt::format("rewards/{}", names[k]), any ? reward[k] / n : 0.0, any ? 1 : 0);
    t.metrics.add(fmt::format("logps/{}", names[k]), any ? logps[k] / n : 0.0, any ? 1 : 0);
  }
  const bool both = count[0] > 0 && count[1] > 0;
  t.metrics.add("rewards/margins",
                both ? reward[1] / double(count[1]) - reward[0] / double(count[0]) : 0.0,
                both ? 1 : 0);
  return t;
}

Tensor KtoObjective::loss(nn::CausalLM& model, const MicroBatch& batch,
                          const LossContext& context) {
  const auto B = int64_t(batch.labels.size());
  FG_CHECK(
      B > 0 && int64_t(batch.row_targets.size()) == 2 * B &&
          (batch.spans.empty() ? batch.ids.size(0) == 2 * B : int64_t(batch.spans.size()) == 2 * B),
      "[kto] a batch of B examples has B labels and 2B answers (each example's completion, "
      "then a mismatched one), each with its target count and its row or span; got {} "
      "labels, {} counts, {} spans, {} rows",
      B, batch.row_targets.size(), batch.spans.size(), batch.ids.size(0));
  FG_CHECK(batch.ref_nll.empty() || int64_t(batch.ref_nll.size()) == 2 * B,
           "[kto] {} precomputed reference values for {} answers", batch.ref_nll.size(), 2 * B);
  // The reference pass first (Note [Preference steps]), so its logits are freed before the
  // policy's forward saves anything.
  const std::vector<double> ref_nll =
      batch.ref_nll.empty() ? reference_nll(context.reference ? *context.reference : model, batch)
                            : batch.ref_nll;
  const Tensor nll = answer_nll(model, batch);
  const LabelScope label("loss");
  return host_loss_of_nll(nll, "kto_loss", [&](const std::vector<double>& values) {
    KtoTerms t = kto_terms(config_, values, ref_nll, batch.labels);
    if (context.metrics) context.metrics->merge(t.metrics);
    return std::pair{t.loss, std::move(t.grad)};
  });
}

void KtoObjective::plan_batch(MicroBatch& batch, int64_t examples) const {
  batch.labels.assign(size_t(examples), 1);
}

std::string KtoObjective::eval_summary(const ObjectiveMetrics& metrics) const {
  const std::map<std::string, double> m = metrics.means();
  if (!m.contains("kl")) return "";
  std::string s = fmt::format("kl {:.4f}", m.at("kl"));
  if (m.contains("rewards/margins")) s += fmt::format(", margin {:.4f}", m.at("rewards/margins"));
  return s;
}

std::unique_ptr<TrainObjective> make_kto(const TrainArgs& a) {
  KtoConfig c;
  c.loss_type = parse_kto_loss(a.loss_type.empty() ? "kto" : a.loss_type);
  c.beta = a.beta;
  c.desirable_weight = a.desirable_weight;
  c.undesirable_weight = a.undesirable_weight;
  FG_CHECK(c.loss_type != KtoLoss::kto || a.per_device_train_batch_size > 1,
           "[train] --objective kto estimates its KL term from the other examples of a batch: "
           "--per_device_train_batch_size 1 leaves none (TRL refuses it too); give 2 or more, or "
           "--loss_type apo_zero_unpaired, which has no KL term");
  return std::make_unique<KtoObjective>(c);
}

}  // namespace fitgrad::train
