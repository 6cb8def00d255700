// Evaluation during a run: the objective's mean loss over the validation batches (the mean
// cross-entropy of a causal LM), under the run's autocast and without gradients. In a dry run the batches are meta tensors and no
// loss is read (Note [Dry run on meta]).
//
// Note [Signals act within a batch]
// A full-split evaluation can take minutes, so the interrupt flag is checked before every
// evaluation batch as it is before every step: on SIGINT or SIGTERM the evaluation stops,
// and the loop saves the checkpoint of the last complete optimizer step and exits.
#include <fmt/format.h>

#include "autograd/autocast.h"
#include "autograd/grad_mode.h"
#include "tensor/interrupt.h"
#include "tensor/memory/scope.h"
#include "train/train_run.h"

namespace fitgrad::train {

std::optional<std::pair<double, int64_t>> evaluate(TrainRun& r) {
  const TrainArgs& a = r.a;
  autograd::NoGradGuard no_grad;
  // A peak during evaluation says so in the peak report (its tensors are saved for no
  // backward, so the ledger files them under other).
  r.alloc.mark(fmt::format("step {} / evaluation", r.step));
  r.lm.model->eval();  // no dropout; the next training step switches back
  autograd::AutocastGuard autocast(compute_dtype(a));
  const int64_t tokens = r.eval_batches * r.eval_batch * a.seq_len;
  // The run's objective scores its held-out examples (Note [Objectives as units]).
  const auto loss_of = [&](const train::MicroBatch& b) {
    return r.objective->loss(*r.lm.model, b, {r.reference.model.get(), &r.eval_metrics});
  };
  // The validation loader; a dry run with --data builds its batches on the host for their
  // shapes only (Note [Dry run on meta]).
  std::optional<data::Loader> val;
  if (!r.val_data.tokens.empty()) {
    data::LoaderOptions lopt;
    lopt.batch_size = r.eval_batch;
    lopt.seq_len = a.seq_len;
    lopt.order = data::DataOrder::sequential;
    lopt.device = r.dry_run ? Device::cpu() : r.device;
    lopt.pairs = r.objective->rows_per_example() == 2;
    lopt.pack_pairs = lopt.pairs && r.packed;
    val.emplace(r.val_data.tokens, lopt, "validation", r.val_data.trained, r.val_data.positions,
                r.val_data.lengths);
  }
  if (r.dry_run) {
    for (int64_t i = 0; i < r.eval_batches; ++i)
      loss_of(val ? r.meta_of(val->next(), "data.validation")
                  : r.meta_batch(r.eval_batch, "data.validation", r.packed));
    return std::pair{NAN, tokens};
  }
  // With trained flags, the mean over the trained targets (Note [Loss over trained targets]);
  // an objective of examples (pairs) has a mean over its examples, each batch of the same number.
  const bool weighted = !r.val_data.trained.empty() && r.objective->weighs_by_targets();
  double sum = 0;
  int64_t targets = 0;
  for (int64_t i = 0; i < r.eval_batches; ++i) {
    if (interrupt_received()) return std::nullopt;
    const train::MicroBatch b = pair_batch(val->next(), r.reference.val, r.val_data);
    const double loss = loss_of(b).item();
    sum += weighted ? loss * double(b.trained_targets) : loss;
    targets += b.trained_targets;
  }
  if (weighted) return std::pair{targets > 0 ? sum / double(targets) : NAN, targets};
  return std::pair{sum / double(r.eval_batches), tokens};
}

}  // namespace fitgrad::train
