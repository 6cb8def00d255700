// One micro-batch of a training step (train/train_step.h) or an evaluation: the token ids,
// their next-token targets and what the step's objective needs besides, on the model's device.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "nn/packed_rows.h"
#include "tensor/row_span.h"
#include "tensor/tensor.h"

namespace fitgrad::train {

struct GrpoMicroBatch;  // train/objectives/grpo.h

struct MicroBatch {
  Tensor ids;                   // (R, T) i64
  Tensor targets;               // (R, T) i64, -100 where untrained
  int64_t trained_targets = 0;  // targets not ignored (-100): the weight_by_targets weight
  // Rows that pack several examples (nn/packed_rows.h), held until the backward is done;
  // segments undefined: one example a row.
  nn::PackedRows packed = {};
  // Preference pairs (Note [Preference steps] in train/preference_loss.h), 2B answers for B
  // pairs, the B chosen ones first: each answer's trained targets,
  std::vector<int64_t> row_targets = {};
  // its positions (one row each, or a span of a packed row; empty: answer n is row n whole),
  std::vector<RowSpan> spans = {};
  // and the reference model's summed NLL of it computed before training
  // (--precompute_ref_log_probs; empty: the step's reference pass computes it).
  std::vector<double> ref_nll = {};
  // Unpaired examples (train/objectives/kto.h), B for 2B answers: each example's label
  // (1: its completion is desirable).
  std::vector<uint8_t> labels = {};
  // GRPO's completions, rows laid out as Note [GRPO rows] (train/objectives/grpo_rows.h)
  // says: each row's advantage, the old and reference log-probabilities and the loss mask;
  // null for the other objectives.
  std::shared_ptr<const GrpoMicroBatch> grpo = {};
};

}  // namespace fitgrad::train
