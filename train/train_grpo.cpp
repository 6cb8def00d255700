// GRPO's part of a `fitgrad train` run (--objective grpo, train/objectives/grpo.h): its prompt
// records as the run's data, the sampling that GrpoObjective::step_batches does for each
// generation batch, and the samples file.
//
// Note [GRPO runs]
//   - Data: --data is a .jsonl of prompt records (train/grpo_prompts.h: a prompt as text or
//     messages, rendered with the generation prompt; the other columns kept for the rewards).
//     Text, instruction data, preference pairs and records that carry their own completion
//     are refused, naming the records GRPO reads. There is no validation split: a GRPO run
//     evaluates nothing (--eval_strategy does not apply; --eval_data and --eval_prompts are
//     refused), and its held-out measure is bench/grpo_task_accuracy.
//   - Prompts: a step samples num_generations completions of each of P = per-device batch x
//     accumulation / num_generations prompts (TRL's generation batch is a step's
//     completions). The prompts run through epochs end to end, each epoch a permutation of the
//     file's records (--data_order random: from --seed and the epoch; sequential: the file's
//     order), and generation batch n takes positions n P to n P + P - 1 of that sequence. Like
//     the draws (Note [GRPO steps]), they are a function of n alone, so a checkpoint keeps no
//     loader state and a resume takes the prompts the whole run took.
//   - The same weights generate and train: sampling runs on the run's model, a LoRA run's
//     base with its adapter on; the reference of --beta is that base with the adapter off, or
//     a full fine-tune's frozen copy (the one copy DPO keeps too).
//   - Samples: at each logging step the completions of the last generation batch's first
//     prompts (kSamplePrompts of them, each group whole) go to <output_dir>/samples.jsonl, a
//     line each: {"step", "prompt", "completion", "reward", "completion_tokens",
//     "truncated"}, the reward the weighted sum of the rewards (NaN when none scored it).
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "io/json_file.h"
#include "tensor/error.h"
#include "train/grpo_prompts.h"
#include "train/objectives/grpo.h"
#include "train/train_run.h"

namespace fitgrad::train {
namespace fs = std::filesystem;

namespace {

constexpr int64_t kSamplePrompts = 2;

// Prompts a generation batch (a step) samples completions of.
int64_t prompts_per_step(const TrainArgs& a) {
  return a.per_device_train_batch_size * a.gradient_accumulation_steps / a.num_generations;
}

// The order of epoch `epoch`'s `count` prompts (Note [GRPO runs]).
std::vector<int64_t> epoch_order(int64_t count, int64_t epoch, const TrainArgs& a) {
  std::vector<int64_t> order(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) order[size_t(i)] = i;
  if (a.data_order == "sequential") return order;
  std::mt19937_64 rng(a.seed * 0x9E3779B97F4A7C15ull + uint64_t(epoch));
  for (int64_t i = count - 1; i > 0; --i) std::swap(order[size_t(i)], order[rng() % (i + 1)]);
  return order;
}

// The prompts of generation batch n (Note [GRPO runs]).
std::vector<GrpoPrompt> batch_prompts(const TrainRun& r, int64_t n) {
  const int64_t per = prompts_per_step(r.a), count = int64_t(r.grpo_prompts.size());
  std::vector<GrpoPrompt> out;
  int64_t epoch = -1;
  std::vector<int64_t> order;
  for (int64_t i = n * per; i < (n + 1) * per; ++i) {
    if (i / count != epoch) {
      epoch = i / count;
      order = epoch_order(count, epoch, r.a);
    }
    out.push_back(r.grpo_prompts[size_t(order[size_t(i % count)])]);
  }
  return out;
}

}  // namespace

void setup_grpo_data(TrainRun& r) {
  const TrainArgs& a = r.a;
  const std::string needs =
      "--objective grpo reads prompt records: a .jsonl file whose every line is {\"prompt\": "
      "text or a list of messages, plus the columns its rewards read, such as \"answer\"}";
  FG_CHECK(!r.group,
           "[train] --objective grpo runs in one process: its generation batches are "
           "not shared among the ranks of a job yet");
  std::error_code ec;
  FG_CHECK(!fs::is_directory(a.data, ec) && fs::path(a.data).extension() == ".jsonl",
           "[train] {}; {} is {}", needs, a.data,
           fs::is_directory(a.data, ec) ? "a folder" : "not a .jsonl file");
  for (const auto& [flag, given] : {std::pair{"eval_data", !a.eval_data.empty()},
                                    {"eval_prompts", !a.eval_prompts.empty()},
                                    {"dataset_format", a.dataset_format != "auto"},
                                    {"packing", a.packing != "auto"},
                                    {"group_by_length", a.group_by_length}})
    FG_CHECK(!given,
             "[train] --{} lays out or evaluates instruction data; --objective grpo samples "
             "its completions from prompts and evaluates nothing: leave it out",
             flag);
  r.grpo_prompts = read_grpo_prompts(a.data, r.lm, a.chat_template, a.max_completion_length);
  for (size_t i = 0; i < r.grpo_prompts.size(); ++i)
    for (const char* answer : {"completion", "chosen", "rejected"})
      FG_CHECK(!r.grpo_prompts[i].row.contains(answer),
               "[train] {} record {} has a \"{}\": that is an SFT or preference record, and "
               "{}; GRPO samples its own completions (rename the column if a reward reads it)",
               a.data, i + 1, answer, needs);
  const int64_t per = prompts_per_step(a), count = int64_t(r.grpo_prompts.size());
  FG_CHECK(count >= per,
           "[train] {} holds {} prompts, fewer than the {} a step samples from "
           "(--per_device_train_batch_size {} x --gradient_accumulation_steps {} / "
           "--num_generations {})",
           a.data, count, per, a.per_device_train_batch_size, a.gradient_accumulation_steps,
           a.num_generations);
  // A step is a generation batch; epoch_at counts micro-batches.
  r.batches_per_epoch = count / per * a.gradient_accumulation_steps;
}

void start_grpo_sampling(TrainRun& r) {
  const TrainArgs& a = r.a;
  auto* grpo = dynamic_cast<GrpoObjective*>(r.objective.get());
  FG_ASSERT(grpo);
  const data::Tokenizer& tok = *r.lm.tokenizer;
  GrpoSampling s;
  GroupGenerationOptions& g = s.settings.generation;
  g.generation_batch_size = a.generation_batch_size > 0
                                ? a.generation_batch_size
                                : a.per_device_train_batch_size * a.gradient_accumulation_steps;
  g.sampling = {a.temperature, a.top_k, a.top_p};
  g.stop_ids = generation_stop_ids(r.lm);
  g.cache_dtype = a.pure_bf16 ? DType::bf16 : DType::f32;
  s.settings.num_iterations = a.num_iterations;
  s.settings.pad_id = tok.pad() ? *tok.pad() : tok.eos() ? *tok.eos() : 0;
  s.functions = grpo_reward_functions(a);
  s.tokenizer = &tok;
  s.reference_model = r.reference.model.get();  // null: the adapter off
  s.seed = a.seed;
  s.prompts = [&r](int64_t n) { return batch_prompts(r, n); };
  grpo->sample_with(std::move(s));
}

int64_t grpo_step_tokens(const TrainRun& r) {
  const auto* grpo = dynamic_cast<const GrpoObjective*>(r.objective.get());
  const GrpoGeneration* g = grpo ? grpo->last_generation() : nullptr;
  int64_t n = 0;
  if (g)
    for (const MicroBatch& m : g->micro_batches) n += m.ids.numel();
  return n;
}

void write_grpo_samples(TrainRun& r) {
  const auto* grpo = dynamic_cast<const GrpoObjective*>(r.objective.get());
  const GrpoGeneration* g = grpo ? grpo->last_generation() : nullptr;
  if (!g || !r.writes_outputs() || r.dry_run) return;
  std::ofstream file(r.dir / "samples.jsonl", std::ios::app);
  for (size_t i = 0; i < g->completions.size(); ++i) {
    const Completion& c = g->completions[i];
    if (c.prompt >= kSamplePrompts) break;
    const double reward = g->rewards[i];
    nlohmann::json line = {
        {"step", r.step},
        {"prompt", grpo->last_prompts()[size_t(c.prompt)].text},
        {"completion", c.text},
        {"reward", std::isnan(reward) ? nlohmann::json() : nlohmann::json(reward)},
        {"completion_tokens", c.ids.size() + (c.stop >= 0 ? 1 : 0)},
        {"truncated", c.truncated}};
    file << io::json_text(line) << "\n";
  }
  FG_CHECK(file.flush(), "[train {}] cannot append to samples.jsonl", r.dir.string());
}

}  // namespace fitgrad::train
