// GRPO's prompt records (issue 59; TRL's GRPOTrainer datasets): a .jsonl whose every line is an
// object with a "prompt", either text (taken as it is) or a conversation (a list of messages,
// TRL's conversational prompt) rendered with the chat template and the generation prompt, as
// transformers' apply_chat_template(prompt, add_generation_prompt=True). Every other column
// of the record is kept as it is, for the reward functions (an "answer" that exact_match
// checks, whatever a --reward_command program reads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "train/model_source.h"
#include "train/objectives/grpo_generation.h"

namespace fitgrad::train {

// The prompts of `path`, in order. `chat_template_file`: --chat_template ("" for the model's
// own, needed only by conversations); a prompt with max_completion_length must fit the model's
// context. A bad line (not JSON, not an object, no "prompt", a prompt neither text nor a
// list of messages, an empty or too long prompt) is an error naming the file and line.
std::vector<GrpoPrompt> read_grpo_prompts(const std::string& path, const LoadedModel& lm,
                                          const std::string& chat_template_file,
                                          int64_t max_completion_length);

}  // namespace fitgrad::train
