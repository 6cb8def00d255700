// How well a model does on the GRPO task of issue 59 (data/tasks/arithmetic/) before or after
// training, through the pieces a GRPO step uses: each prompt rendered with the model's chat
// template and its generation prompt, G completions per prompt from train::generate_groups
// (stopping at the model's stop tokens), scored by the built-in last_number:answer reward.
//
//   build/bench/grpo_task_accuracy [SPLIT [G [TEMPERATURE [MAX_COMPLETION_LENGTH [MODEL]]]]]
//
// SPLIT: data/tasks/arithmetic/heldout.jsonl (run from the repository root); G: 1; TEMPERATURE:
// 0 (greedy); MAX_COMPLETION_LENGTH: 32; MODEL: $FITGRAD_SMOLLM2, else $FITGRAD_CACHE (or
// ~/.cache/fitgrad) / SmolLM2-135M-Instruct.Q4_1.gguf, as tools/fetch-smollm2.sh puts it (a
// checkpoint directory of a run works too); when it is absent the program says how to fetch it
// and exits 0. Draws: seed 0. It prints the accuracy (the mean reward over all completions),
// the share of prompts with at least one right completion, the share of groups whose rewards
// differ (GRPO learns only from those), the truncated share, and the first completions.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/io/smollm2_file.h"
#include "train/chat_prompt.h"
#include "train/grouped_generation.h"
#include "train/model_source.h"
#include "train/rewards/answer_match.h"

using namespace fitgrad;

int main(int argc, char** argv) {
  const std::string split = argc > 1 ? argv[1] : "data/tasks/arithmetic/heldout.jsonl";
  const int64_t g = argc > 2 ? std::atoll(argv[2]) : 1;
  const double temperature = argc > 3 ? std::atof(argv[3]) : 0.0;
  const int64_t length = argc > 4 ? std::atoll(argv[4]) : 32;
  const std::string model = argc > 5 ? argv[5] : test::smollm2_path();
  if (!std::filesystem::exists(model)) {
    std::printf("no model at %s: run tools/fetch-smollm2.sh first\n", model.c_str());
    return 0;
  }
  train::LoadedModel loaded = train::load_model(model, "", {});
  const data::ChatTemplate chat =
      train::model_chat_template(loaded, "", model, "grpo_task_accuracy");
  std::ifstream in(split);
  std::vector<std::vector<int32_t>> prompts;
  std::vector<train::rewards::RewardSample> rows;
  for (std::string line; std::getline(in, line);) {
    const auto row = nlohmann::ordered_json::parse(line);
    const train::Conversation conversation =
        train::conversation_of(row.at("prompt"), split, "grpo_task_accuracy");
    const std::string text = train::chat_prompt(chat, conversation, *loaded.tokenizer);
    prompts.push_back(loaded.tokenizer->encode(text, true));
    train::rewards::RewardSample s;
    s.prompt = text;
    s.row = nlohmann::json::parse(line);
    rows.push_back(std::move(s));
  }
  train::GroupGenerationOptions o;
  o.num_generations = g;
  o.max_completion_length = length;
  o.sampling.temperature = temperature;
  o.stop_ids = train::generation_stop_ids(loaded);
  Generator generator(0);
  const auto completions =
      train::generate_groups(*loaded.model, loaded.tokenizer.get(), prompts, o, generator);
  std::vector<train::rewards::RewardSample> samples;
  for (const train::Completion& c : completions) {
    train::rewards::RewardSample s = rows[size_t(c.prompt)];
    s.completion = c.text;
    s.completion_ids = c.ids;
    s.truncated = c.truncated;
    samples.push_back(std::move(s));
  }
  train::rewards::AnswerMatchReward reward(train::rewards::AnswerExtraction::last_number, "answer");
  const std::vector<double> r = reward.score(samples);
  double right = 0, truncated = 0;
  int64_t solved = 0, differing = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    double group_sum = 0;
    for (int64_t k = 0; k < g; ++k) group_sum += r[p * size_t(g) + size_t(k)];
    solved += group_sum > 0;
    differing += group_sum > 0 && group_sum < double(g);
  }
  for (size_t i = 0; i < r.size(); ++i) {
    right += r[i];
    truncated += completions[i].truncated;
  }
  const double n = double(r.size()), np = double(prompts.size());
  std::printf("%s: %zu prompts x %lld completions, temperature %g, at most %lld tokens\n",
              split.c_str(), prompts.size(), (long long)g, temperature, (long long)length);
  std::printf(
      "accuracy %.3f (%g of %g); prompts solved at least once %.3f; groups with "
      "differing rewards %.3f; truncated %.3f\n",
      right / n, right, n, double(solved) / np, double(differing) / np, truncated / n);
  for (size_t i = 0; i < std::min<size_t>(6, completions.size()); ++i)
    std::printf("  [%g] answer %s: %s\n", r[i], samples[i].row.at("answer").dump().c_str(),
                nlohmann::json(completions[i].text)
                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                    .c_str());
  return 0;
}
