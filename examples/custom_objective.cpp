// Training through the library, as a program that embeds fitgrad would: a Llama-shaped model
// from a preset, the bytes of a text as tokens, AdamW, and an objective of the program's own
// handed to the library's training step (train/train_step.h, TrainStepOptions::objective)
// through the interface every objective of `fitgrad train` implements
// (train/objectives/objective.h, Note [Objectives as units]):
// label-smoothed cross-entropy (Szegedy et al. 2016), whose target is (1 - eps) the one-hot
// next token plus eps the uniform distribution:
//   loss = (1 - eps) * CE(logits, targets) + eps * mean over tokens of -mean_v log p_v.
// It checks what it relies on and exits 1 when a check fails: at eps = 0 the objective equals
// the library's own cross-entropy (CausalLM::loss), and training lowers it.
// Usage: custom_objective [TEXT_FILE [STEPS]] (default: a built-in text, 60 steps).
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "nn/config.h"
#include "nn/decoder.h"
#include "optim/factory.h"
#include "optim/schedule.h"
#include "train/objectives/objective.h"
#include "train/train_step.h"

namespace {

using namespace fitgrad;
namespace ag = fitgrad::autograd;

constexpr double kSmoothing = 0.1;
constexpr int64_t kBatch = 4, kSeq = 32;

// The objective: (B, T) ids and targets (every target trained) -> () loss.
Tensor label_smoothed_loss(nn::CausalLM& model, const train::MicroBatch& b, double eps) {
  const Tensor logits = model.forward(b.ids);  // (B, T, V)
  const int64_t n = b.ids.numel(), vocab = logits.size(2);
  const Tensor flat = ag::reshape(logits, {n, vocab});  // (N, V)
  const Tensor ce = ag::cross_entropy(flat, b.targets.reshape({n}));
  if (eps == 0) return ce;
  const Tensor uniform = ag::neg(ag::mean(ag::log_softmax(flat, 1)));  // ()
  return ag::add(ag::scale(ce, 1 - eps), ag::scale(uniform, eps));
}

// The objective as the step runs it: the label-smoothed loss of each micro-batch.
class LabelSmoothed final : public train::TrainObjective {
 public:
  explicit LabelSmoothed(double eps) : eps_(eps) {}
  std::string name() const override { return "label_smoothed"; }
  bool is_cross_entropy() const override { return true; }
  Tensor loss(nn::CausalLM& model, const train::MicroBatch& b, const train::LossContext&) override {
    return label_smoothed_loss(model, b, eps_);
  }

 private:
  double eps_;
};

// SplitMix64: a position for window `r` of draw `draw`.
uint64_t mix(uint64_t draw, uint64_t r) {
  uint64_t x = draw * 0x9E3779B97F4A7C15ull + r + 1;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// kBatch windows of kSeq + 1 bytes of `text` at positions drawn from `draw`.
train::MicroBatch next_batch(const std::string& text, uint64_t draw) {
  std::vector<int64_t> ids, targets;
  const uint64_t span = text.size() - kSeq - 1;
  for (int64_t r = 0; r < kBatch; ++r) {
    const uint64_t start = mix(draw, uint64_t(r)) % span;
    for (int64_t t = 0; t < kSeq; ++t) {
      ids.push_back(static_cast<unsigned char>(text[start + t]));
      targets.push_back(static_cast<unsigned char>(text[start + t + 1]));
    }
  }
  train::MicroBatch b;
  b.ids = Tensor::from_vector(ids, {kBatch, kSeq}, DType::i64);          // (B, T)
  b.targets = Tensor::from_vector(targets, {kBatch, kSeq}, DType::i64);  // (B, T)
  b.trained_targets = kBatch * kSeq;
  return b;
}

std::string default_text() {
  std::string s;
  for (int i = 0; i < 40; ++i)
    s += "It is a truth universally acknowledged, that a single man in possession of a good "
         "fortune, must be in want of a wife. ";
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::string text = default_text();
  if (argc > 1) {
    std::ifstream in(argv[1], std::ios::binary);
    if (!in) {
      fmt::print(stderr, "custom_objective: cannot read {}\n", argv[1]);
      return 2;
    }
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const int64_t steps = argc > 2 ? std::stoll(argv[2]) : 60;
  if (text.size() < size_t(kSeq) + 2 || steps < 20) {
    fmt::print(stderr, "custom_objective: the text needs {} bytes and the run 20 steps\n",
               kSeq + 2);
    return 2;
  }

  nn::BuildOptions build;
  build.seed = 1;
  const std::unique_ptr<nn::CausalLM> model = nn::build_model(nn::preset("llama-tiny"), build);
  optim::AdamWOptions adam;
  adam.lr = 3e-3;
  const std::unique_ptr<optim::Optimizer> optimizer =
      optim::make_optimizer("adamw_torch", {{model->named_parameters(), 0.0}}, adam);
  const optim::LrSchedule schedule(optim::LrSchedule::Kind::constant, adam.lr, 0, steps);

  // What the objective relies on: at eps = 0 it is the library's cross-entropy.
  {
    ag::NoGradGuard no_grad;
    const train::MicroBatch b = next_batch(text, 0);
    const double mine = label_smoothed_loss(*model, b, 0.0).item();
    const double library = model->loss(b.ids, b.targets).item();
    fmt::print("at eps = 0: {:.6f}, the library's cross-entropy {:.6f}\n", mine, library);
    if (std::abs(mine - library) > 1e-5 * std::abs(library)) return 1;
  }

  train::TrainStepOptions options;
  options.objective = std::make_shared<LabelSmoothed>(kSmoothing);
  train::TrainStep step(*model, *optimizer, schedule, options);
  double first = NAN, last = NAN;
  for (int64_t s = 0; s < steps; ++s) {
    step.run(s, [&](int64_t) { return next_batch(text, uint64_t(s + 1)); });
    if ((s + 1) % 10 == 0) {
      const double loss = step.take_log().mean_loss;
      fmt::print("steps {:>4}-{:<4} label-smoothed loss {:.4f}\n", s - 8, s + 1, loss);
      if (std::isnan(first)) first = loss;
      last = loss;
    }
  }
  if (!(last < 0.9 * first)) {
    fmt::print(stderr, "custom_objective: the loss did not fall ({} -> {})\n", first, last);
    return 1;
  }
  return 0;
}
