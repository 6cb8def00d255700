// --eval_prompts FILE (issue "Instruction and chat fine-tuning"): prompts a training run
// completes at each evaluation, so that the fine-tune's effect is read as text beside its
// loss (Note [Prompts at evaluation] in eval_prompts.cpp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "train/model_source.h"
#include "train/train_args.h"

namespace fitgrad::train {

struct EvalPrompt {
  std::string where;         // "<file> line <n>"
  std::string text;          // the prompt as the model reads it
  std::vector<int32_t> ids;  // its tokens
};

// The prompts of --eval_prompts, each line a conversation (a list of messages, or an object
// with "messages"), rendered through the chat template with the generation prompt, or an
// object {"prompt": text} taken as it is. A bad line is an error naming the file and line.
std::vector<EvalPrompt> read_eval_prompts(const TrainArgs& a, const LoadedModel& lm);

// The model's greedy completions of the prompts, as it is now (no gradients), at most
// `max_new_tokens` each or up to its stop ids: [{"prompt", "completion"}, ...].
nlohmann::json complete_prompts(const TrainArgs& a, const LoadedModel& lm,
                                const std::vector<EvalPrompt>& prompts, int64_t max_new_tokens);

}  // namespace fitgrad::train
