// One GRPO generation batch (issue 59; TRL 1.16's GRPOTrainer._generate_and_score_completions):
// G completions of each prompt sampled from the model (train/grouped_generation.h), scored by
// the reward functions (train/rewards/), their advantages (grpo_advantages), their rows
// (Note [GRPO rows]) cut into the micro-batches of a step, with the old policy's
// log-probabilities when the batch is reused (num_iterations > 1) and the reference's when
// beta > 0, and TRL's statistics of the batch. GrpoObjective::step_batches calls it once per
// generation batch.
//
// Note [GRPO generation batch]
// The P prompts' P G completions are split in order into `micro_batches` micro-batches of
// P G / micro_batches rows each (TRL's steps_per_generation = gradient_accumulation_steps,
// its default; P G must divide). Each completion is trained with the stop token that ended it
// (TRL's completion mask covers the first eos); the rewards read it without (its text as
// TRL's batch_decode with skip_special_tokens). The old log-probabilities are computed, as
// TRL does, only when the batch is trained more than once (num_iterations > 1): else the loss
// takes the policy's own, detached. Everything here runs without a gradient and each pass's
// KV cache and logits are freed before the next, so the training pass that follows starts
// with none of it. A reward function's error (a failing --reward_command) propagates before
// any micro-batch trains.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/tokenizer.h"
#include "nn/decoder.h"
#include "tensor/random/generator.h"
#include "train/grouped_generation.h"
#include "train/micro_batch.h"
#include "train/objectives/grpo_loss.h"
#include "train/objectives/objective.h"
#include "train/rewards/reward_function.h"

namespace fitgrad::train {

// A prompt to complete: its tokens (the chat template's rendering with the generation prompt
// for messages), its text (what the rewards read as the prompt) and its record's columns.
struct GrpoPrompt {
  std::vector<int32_t> ids;
  std::string text;
  nlohmann::json row = nlohmann::json::object();
};

struct GrpoGenerationSettings {
  GrpoConfig config;
  GroupGenerationOptions generation;  // num_generations and max_completion_length: config's
  double temperature = 1.0;           // the log-probabilities' (the sampling temperature)
  int64_t num_iterations = 1;         // trainings of each generation batch
  int64_t pad_id = 0;
};

struct GrpoGeneration {
  std::vector<MicroBatch> micro_batches;
  std::vector<Completion> completions;  // P G, in order
  std::vector<double> rewards;          // P G: each completion's combined reward
  ObjectiveMetrics metrics;             // TRL's: reward, reward_std, rewards/<f>/mean, ...
};

// The generation batch of `prompts` (Note [GRPO generation batch]); `reference_model` null:
// the model with its adapters off.
GrpoGeneration grpo_generation(nn::CausalLM& model, const data::Tokenizer* tokenizer,
                               const std::vector<GrpoPrompt>& prompts,
                               const GrpoGenerationSettings& settings,
                               const rewards::RewardFunctions& functions, int64_t micro_batches,
                               Generator& generator, nn::CausalLM* reference_model = nullptr);

}  // namespace fitgrad::train
