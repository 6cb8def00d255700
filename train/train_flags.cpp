// The table of `fitgrad train` flags and what is generated from it (train_flags.h).
#include "train/train_flags.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include "tensor/error.h"
#include "train/chat_prompt.h"
#include "train/checkpoint_dir.h"
#include "train/model_source.h"
#include "train/objectives/registry.h"
#include "train/rewards/reward_funcs.h"

namespace fitgrad::train {

namespace {

// The whole of `text` as a number, or NaN (which every range check refuses).
double number(const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return text.empty() || *end != '\0' ? std::nan("") : v;
}

}  // namespace

FlagCheck positive_number() {
  return {"POSITIVE", [](const std::string& text) -> std::string {
            const double v = number(text);  // NaN and infinity refused alike
            return v > 0 && std::isfinite(v)
                       ? ""
                       : fmt::format("must be a positive finite number, got '{}'", text);
          }};
}

FlagCheck number_in(double lo, double hi) {
  return {fmt::format("[{} - {}]", lo, hi), [lo, hi](const std::string& text) -> std::string {
            const double v = number(text);
            return v >= lo && v <= hi
                       ? ""
                       : fmt::format("must be a number in [{}, {}], got '{}'", lo, hi, text);
          }};
}

FlagCheck u64_digits() {
  return {"UINT64", [](const std::string& text) -> std::string {
            const std::string max = "18446744073709551615";
            const bool digits =
                !text.empty() && text.find_first_not_of("0123456789") == std::string::npos;
            const std::string trimmed =
                digits ? text.substr(std::min(text.find_first_not_of('0'), text.size() - 1)) : text;
            if (!digits || trimmed.size() > max.size() ||
                (trimmed.size() == max.size() && trimmed > max))
              return fmt::format("must be an integer in [0, {}], got '{}'", max, text);
            return "";
          }};
}

namespace {

// --objective's values and help, from the registered objectives (train/objectives/registry.h).
std::vector<std::string> objective_names() {
  std::vector<std::string> names;
  for (const ObjectiveEntry& e : objectives()) names.push_back(e.name);
  return names;
}
// --beta's help: what it weighs, then the objectives whose default differs from the table's
// (registry.h's BetaRule).
std::string beta_help() {
  std::string help =
      "DPO's, KTO's and GRPO's beta (the strength of the reference's pull); ORPO's lambda (the "
      "weight of the odds-ratio term)";
  for (const ObjectiveEntry& e : objectives())
    if (e.beta.fallback != TrainArgs().beta)
      help += fmt::format("; {}'s default {}{}", e.name, e.beta.fallback,
                          e.beta.zero ? " (0: no reference)" : "");
  return help;
}

// Positive, or 0 for the objectives that allow it (objective_beta refuses 0 for the others).
FlagCheck beta_number() {
  return {"NON-NEGATIVE", [](const std::string& text) -> std::string {
            const double v = number(text);
            return v >= 0 && std::isfinite(v)
                       ? ""
                       : fmt::format(
                             "must be a positive finite number (or 0 where the objective allows "
                             "it), got '{}'",
                             text);
          }};
}

std::string objective_help() {
  std::string help = "What the run learns:";
  for (const ObjectiveEntry& e : objectives())
    help +=
        fmt::format("{} {} ({})", e.name == objectives().front().name ? "" : ";", e.name, e.help);
  return help;
}

}  // namespace

const std::vector<TrainFlag>& train_flags() {
  static const std::vector<TrainFlag> table = {
      {"model", &TrainArgs::model,
       std::string(kModelSpecHelp) + " (presets: `fitgrad train --help` footer)", kRanksAgree},
      {"init", &TrainArgs::init, kInitHelp, kRanksAgree | kPlanLine},
      {"data", &TrainArgs::data,
       "A UTF-8 text file, a .jsonl or .json file of records, or a folder of one of the two kinds "
       "(required, except for --device meta, which sizes its batches from it when given)",
       kRanksAgree},
      {"output_dir", &TrainArgs::output_dir,
       "Where checkpoints, metrics, the loss curve and the memory trace go",
       kRanksAgree | kRequired},
      {"seq_len", &TrainArgs::seq_len, "Tokens per training sequence",
       kRanksAgree | kResumeKeeps | kAlwaysOnPlanLine},
      {"device", &TrainArgs::device,
       "cpu, cuda:N, or meta: a dry run that allocates as the real run does and computes nothing "
       "(needs --max_steps or --data; writes only the memory record)",
       kRanksAgree | kPlanLine},
      {"memory_budget", &TrainArgs::memory_budget,
       "Device memory capacity enforced by the allocator, such as 24GiB", 0},
      {"allocator", &TrainArgs::allocator,
       "native (a segment per raw allocation) or expandable (each stream's large pool is one "
       "segment whose mapping grows by 2 MiB granules, so freed neighbours always merge)",
       kPlanLine},
      {"data_order",
       &TrainArgs::data_order,
       "random (seeded) or sequential",
       kRanksAgree | kPlanLine,
       {"random", "sequential"}},
      {"val_fraction", &TrainArgs::val_fraction,
       "Fraction of the tokens (the end of the data) held out for validation; of the examples, for "
       "instruction data",
       kRanksAgree | kPlanLine},
      {"eval_data", &TrainArgs::eval_data,
       "Instruction data (.jsonl / .json, a file or a folder) to validate on instead of a split of "
       "--data",
       kRanksAgree | kPlanLine},
      {"eval_prompts", &TrainArgs::eval_prompts,
       "A .jsonl of prompts (conversations, or {\"prompt\": text}) the model completes at each "
       "evaluation, into metrics.jsonl and eval_samples.jsonl",
       kRanksAgree | kPlanLine},
      {"eval_max_new_tokens",
       &TrainArgs::eval_max_new_tokens,
       "Tokens at most in each --eval_prompts completion",
       kRanksAgree | kPlanLine,
       {},
       std::nullopt,
       "eval_prompts"},
      {"dataset_format",
       &TrainArgs::dataset_format,
       "For .jsonl / .json data: auto (detected per file), text, alpaca, sharegpt, messages, "
       "prompt_completion, preference (prompt, chosen, rejected) or unpaired_preference (prompt, "
       "completion, label)",
       kRanksAgree | kPlanLine,
       {"auto", "text", "alpaca", "sharegpt", "messages", "prompt_completion", "preference",
        "unpaired_preference"}},
      {"dataset_text_field", &TrainArgs::dataset_text_field,
       "The field of a text record that holds its text", kRanksAgree | kPlanLine},
      {"train_on",
       &TrainArgs::train_on,
       "Which tokens of a conversation the loss learns: assistant (every assistant turn), last "
       "(the last one) or all",
       kRanksAgree | kPlanLine,
       {"assistant", "last", "all"}},
      {"skip_bad_examples", &TrainArgs::skip_bad_examples,
       "Count and report malformed records instead of stopping at the first",
       kRanksAgree | kPlanLine},
      {"chat_template", &TrainArgs::chat_template, kChatTemplateHelp, kRanksAgree | kPlanLine},
      {"packing",
       &TrainArgs::packing,
       "How instruction data fills the rows: bfd (whole examples, best-fit decreasing, each "
       "attending to itself), wrapped (end to end, cut at --seq_len), none (one padded example a "
       "row); auto: bfd, or none for plain text records. Preference pairs: bfd packs each batch's "
       "answers into rows, none gives each answer a row",
       kRanksAgree | kResumeKeeps | kPlanLine,
       {"auto", "bfd", "wrapped", "none"}},
      {"objective", &TrainArgs::objective, objective_help(), kRanksAgree | kResumeKeeps | kPlanLine,
       objective_names()},
      {"beta",
       &TrainArgs::beta,
       beta_help(),
       kRanksAgree | kPlanLine,
       {},
       beta_number(),
       "objective"},
      {"loss_type",
       &TrainArgs::loss_type,
       "DPO's loss: sigmoid (its default), hinge or ipo; KTO's: kto (its default) or "
       "apo_zero_unpaired; GRPO's normalization: dapo (its default, over the generation batch's "
       "tokens), grpo (each completion's mean), bnpo (the micro-batch's tokens) or dr_grpo (a "
       "constant, --max_completion_length)",
       kRanksAgree | kPlanLine,
       {"sigmoid", "hinge", "ipo", "kto", "apo_zero_unpaired", "grpo", "bnpo", "dr_grpo", "dapo"},
       std::nullopt,
       "objective"},
      {"label_smoothing",
       &TrainArgs::label_smoothing,
       "DPO sigmoid: the assumed share of pairs whose preference is flipped (conservative DPO), in "
       "[0, 0.5)",
       kRanksAgree | kPlanLine,
       {},
       number_in(0.0, 0.4999999),
       "objective"},
      {"desirable_weight",
       &TrainArgs::desirable_weight,
       "KTO: the weight of a desirable example's loss (to balance unequal numbers of desirable "
       "and undesirable examples)",
       kRanksAgree | kPlanLine,
       {},
       positive_number(),
       "objective"},
      {"undesirable_weight",
       &TrainArgs::undesirable_weight,
       "KTO: the weight of an undesirable example's loss",
       kRanksAgree | kPlanLine,
       {},
       positive_number(),
       "objective"},
      {"precompute_ref_log_probs",
       &TrainArgs::precompute_ref_log_probs,
       "DPO, KTO: compute the reference model's log-probabilities of every example in one pass "
       "before training (kept in the output directory for a resume), so that the steps make no "
       "reference "
       "pass and a full fine-tune keeps no frozen copy of its weights",
       kRanksAgree | kPlanLine,
       {},
       std::nullopt,
       "objective"},
      {"num_generations", &TrainArgs::num_generations,
       "GRPO: completions sampled per prompt, a group (at least 2; it must divide "
       "--per_device_train_batch_size x --gradient_accumulation_steps, the completions of a step)",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"max_completion_length", &TrainArgs::max_completion_length,
       "GRPO: tokens at most in a completion, its stop token included",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"temperature",
       &TrainArgs::temperature,
       "GRPO: the sampling temperature (the log-probabilities of the loss divide by it too)",
       kRanksAgree | kResumeKeeps | kPlanLine,
       {},
       positive_number()},
      {"top_p",
       &TrainArgs::top_p,
       "GRPO: sample from the smallest set of tokens whose probability reaches top_p (1: off)",
       kRanksAgree | kResumeKeeps | kPlanLine,
       {},
       number_in(0, 1)},
      {"top_k", &TrainArgs::top_k, "GRPO: sample from the top_k likeliest tokens (0: off)",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"generation_batch_size", &TrainArgs::generation_batch_size,
       "GRPO: completions decoded at once, the KV cache's rows (0: a step's, "
       "--per_device_train_batch_size x --gradient_accumulation_steps, as TRL; a multiple of "
       "--num_generations)",
       kRanksAgree | kPlanLine},
      {"reward_funcs", &TrainArgs::reward_funcs, "GRPO: " + rewards::reward_funcs_help(),
       kRanksAgree | kPlanLine},
      {"reward_weights", &TrainArgs::reward_weights,
       "GRPO: the weight of each reward, comma-separated numbers, one per --reward_funcs entry "
       "and one more for --reward_command (default: each 1)",
       kRanksAgree | kPlanLine},
      {"reward_command", &TrainArgs::reward_command,
       "GRPO: a program that scores completions, run without a shell: one JSON line a "
       "completion in ({\"prompt\", \"completion\", \"completion_tokens\", \"truncated\", "
       "the record's other columns}), one number a line out (nan or null: none); any failure "
       "stops the run, its last checkpoint kept",
       kRanksAgree | kPlanLine},
      {"reward_timeout",
       &TrainArgs::reward_timeout,
       "GRPO: seconds --reward_command may take for a generation batch",
       kRanksAgree | kPlanLine,
       {},
       positive_number(),
       "reward_command"},
      {"epsilon",
       &TrainArgs::epsilon,
       "GRPO: the importance ratio is clipped at 1 - epsilon",
       kRanksAgree | kPlanLine,
       {},
       number_in(0, 1)},
      {"epsilon_high", &TrainArgs::epsilon_high,
       "GRPO: the importance ratio is clipped at 1 + epsilon_high (DAPO's clip-higher; default "
       "--epsilon)",
       kRanksAgree | kPlanLine},
      {"num_iterations", &TrainArgs::num_iterations,
       "GRPO: steps each generation batch trains, its old log-probabilities those of the policy "
       "that sampled it",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"scale_rewards",
       &TrainArgs::scale_rewards,
       "GRPO: the advantages (reward minus the group's mean) divided by the group's standard "
       "deviation, the batch's, or none",
       kRanksAgree | kPlanLine,
       {"group", "batch", "none"}},
      {"importance_sampling_level",
       &TrainArgs::importance_sampling_level,
       "GRPO: the importance ratio of each token, or of each sequence (GSPO)",
       kRanksAgree | kPlanLine,
       {"token", "sequence"}},
      {"mask_truncated_completions", &TrainArgs::mask_truncated_completions,
       "GRPO: completions that ran to --max_completion_length without a stop token train nothing",
       kRanksAgree | kPlanLine},
      {"group_by_length", &TrainArgs::group_by_length,
       "With --packing none, or preference pairs: batch examples (pairs) of similar lengths "
       "together (as transformers' LengthGroupedSampler) and cut each batch to its longest example "
       "(its fullest row)",
       kRanksAgree | kPlanLine},
      {"per_device_train_batch_size", &TrainArgs::per_device_train_batch_size,
       "Sequences per micro-batch", kRanksAgree | kAlwaysOnPlanLine},
      {"per_device_eval_batch_size", &TrainArgs::per_device_eval_batch_size,
       "Sequences per validation batch", kRanksAgree | kPlanLine},
      {"gradient_accumulation_steps", &TrainArgs::gradient_accumulation_steps,
       "Micro-batches per optimizer step", kRanksAgree | kResumeKeeps | kPlanLine},
      {"gradient_checkpointing", &TrainArgs::gradient_checkpointing,
       "Recompute each decoder block in backward instead of saving its activations",
       kRanksAgree | kPlanLine},
      {"checkpoint_segments",
       &TrainArgs::checkpoint_segments,
       "With --gradient_checkpointing: checkpoint the blocks in N segments, each saving only its "
       "input (0: every block its own segment)",
       kRanksAgree | kPlanLine,
       {},
       std::nullopt,
       "gradient_checkpointing"},
      {"fused_head_loss", &TrainArgs::fused_head_loss,
       "Compute the head and the loss together over row chunks, never holding the (tokens, vocab) "
       "logits; backward recomputes each chunk's logits",
       kRanksAgree | kPlanLine},
      {"head_chunk_size",
       &TrainArgs::head_chunk_size,
       "With --fused_head_loss: token rows per chunk (0: ceil(vocab / hidden) chunks, so a chunk's "
       "logits are about the size of the hidden states)",
       kRanksAgree | kPlanLine,
       {},
       std::nullopt,
       "fused_head_loss"},
      {"tiled_mlp", &TrainArgs::tiled_mlp,
       "Run each block's norm and MLP over tiles of the tokens, keeping only its input; backward "
       "recomputes one tile at a time",
       kRanksAgree | kPlanLine},
      {"mlp_tiles",
       &TrainArgs::mlp_tiles,
       "With --tiled_mlp: tiles per block (0: ceil(tokens / hidden), as Arctic)",
       kRanksAgree | kPlanLine,
       {},
       std::nullopt,
       "tiled_mlp"},
      {"bf16", &TrainArgs::bf16,
       "bf16 mixed precision: fp32 master weights, matmuls in bf16 (autocast)",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"fp16", &TrainArgs::fp16,
       "fp16 mixed precision: f16 autocast with a dynamic loss scaler (GradScaler's rules)",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"tf32", &TrainArgs::tf32,
       "TF32 matmuls (operands rounded to 10 mantissa bits, fp32 accumulation)",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"pure_bf16", &TrainArgs::pure_bf16,
       "bf16 parameters with no fp32 master copy (training and evaluation in bf16)",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"stochastic_rounding",
       &TrainArgs::stochastic_rounding,
       "With --pure_bf16: round each weight update stochastically (Philox, from --seed)",
       kRanksAgree | kResumeKeeps | kPlanLine,
       {},
       std::nullopt,
       "pure_bf16"},
      {"optim_in_backward", &TrainArgs::optim_in_backward,
       "Update each parameter in its gradient hook and free its gradient at once (needs "
       "--max_grad_norm 0)",
       kRanksAgree | kPlanLine},
      {"offload_optimizer", &TrainArgs::offload_optimizer,
       "Keep the optimizer's state and a copy of the trained parameters in host memory and update "
       "them on the CPU (ZeRO-Offload; needs --device cuda, or meta to plan)",
       kRanksAgree | kPlanLine},
      {"offload_activations",
       &TrainArgs::offload_activations,
       "With --gradient_checkpointing: keep the activations saved for backward in host memory, "
       "copied out and prefetched back while the card computes (on cpu: in a separate host arena, "
       "cpu:1, that the device budget does not count)",
       kRanksAgree | kPlanLine,
       {},
       std::nullopt,
       "gradient_checkpointing"},
      {"weights_int8", &TrainArgs::weights_int8,
       "Train every Linear of the decoder blocks in 8 bits (Q-GaLore's int8 weights: u8 codes, a "
       "scale and a zero per group, updates re-quantized stochastically)",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"weight_group_size",
       &TrainArgs::weight_group_size,
       "With --weights_int8: values per quantization group (Q-GaLore's default)",
       kRanksAgree | kResumeKeeps | kPlanLine,
       {},
       std::nullopt,
       "weights_int8"},
      {"quantize",
       &TrainArgs::quantize,
       "nf4: keep the frozen base in 4 bits (QLoRA; needs --lora_r)",
       kRanksAgree | kResumeKeeps | kPlanLine,
       {"", "nf4"}},
      {"lora_r", &TrainArgs::lora_r, "LoRA rank (0: no LoRA; train every parameter)",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"lora_alpha",
       &TrainArgs::lora_alpha,
       "LoRA alpha (scaling alpha / r)",
       kRanksAgree | kPlanLine,
       {},
       std::nullopt,
       "lora_r"},
      {"lora_dropout",
       &TrainArgs::lora_dropout,
       "Dropout on the LoRA input",
       kRanksAgree | kPlanLine,
       {},
       std::nullopt,
       "lora_r"},
      {"lora_target",
       &TrainArgs::lora_target,
       "PEFT target_modules: all-linear, or names such as q_proj,v_proj",
       kRanksAgree | kResumeKeeps | kPlanLine,
       {},
       std::nullopt,
       "lora_r"},
      {"use_rslora",
       &TrainArgs::use_rslora,
       "rsLoRA scaling alpha / sqrt(r)",
       kRanksAgree | kPlanLine,
       {},
       std::nullopt,
       "lora_r"},
      {"bnb_4bit_quant_type",
       &TrainArgs::bnb_4bit_quant_type,
       "nf4 or fp4 (with --quantize)",
       kRanksAgree | kResumeKeeps | kPlanLine,
       {"nf4", "fp4"},
       std::nullopt,
       "quantize"},
      {"bnb_4bit_use_double_quant",
       &TrainArgs::bnb_4bit_use_double_quant,
       "Quantize the 4-bit absmaxes too (4.127 instead of 4.5 bits per weight)",
       kRanksAgree | kResumeKeeps | kPlanLine,
       {},
       std::nullopt,
       "quantize"},
      {"optim", &TrainArgs::optim,
       "Optimizer: adamw_torch (= adamw_hf, adamw_torch_fused), sgd, adamw_8bit (= adamw_bnb_8bit, "
       "adam8bit), adafactor (torch's), adafactor_hf (transformers'), apollo, apollo_mini, "
       "galore_adamw, galore_adamw_8bit",
       kRanksAgree | kAlwaysOnPlanLine},
      {"optim_args", &TrainArgs::optim_args,
       "Hugging Face's optim_args, key=value,... apollo and apollo_mini: rank, scale, scale_type "
       "(channel or tensor), update_proj_gap, proj (random), proj_type (std); galore_adamw and "
       "galore_adamw_8bit: rank (default 128), update_proj_gap (200), scale (0.25), proj_type "
       "(std); sgd (fitgrad's addition): momentum, dampening, nesterov (true or false)",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"optim_target_modules", &TrainArgs::optim_target_modules,
       "Hugging Face's optim_target_modules: the modules whose 2-D weights apollo, apollo_mini, "
       "galore_adamw and galore_adamw_8bit project, comma-separated, each a substring of the "
       "module name or a regular expression over all of it (apollo's default attn,mlp; required by "
       "galore)",
       kRanksAgree | kResumeKeeps | kPlanLine},
      {"learning_rate", &TrainArgs::learning_rate,
       "Peak learning rate (adafactor_hf without it: its relative step)", kRanksAgree | kPlanLine},
      {"adam_beta1", &TrainArgs::adam_beta1, "AdamW beta1", kRanksAgree | kPlanLine},
      {"adam_beta2", &TrainArgs::adam_beta2, "AdamW beta2", kRanksAgree | kPlanLine},
      {"adam_epsilon", &TrainArgs::adam_epsilon, "AdamW epsilon", kRanksAgree | kPlanLine},
      {"weight_decay", &TrainArgs::weight_decay,
       "Decoupled weight decay (not applied to biases and norm weights)", kRanksAgree | kPlanLine},
      {"max_grad_norm", &TrainArgs::max_grad_norm, "Gradient clipping norm (0: off)",
       kRanksAgree | kPlanLine},
      {"lr_scheduler_type", &TrainArgs::lr_scheduler_type,
       "linear, cosine, cosine_with_restarts, polynomial, constant, constant_with_warmup, "
       "inverse_sqrt",
       kRanksAgree | kPlanLine},
      {"warmup_steps", &TrainArgs::warmup_steps, "Linear warmup steps", kRanksAgree | kPlanLine},
      {"warmup_ratio", &TrainArgs::warmup_ratio,
       "Warmup as a fraction of the total steps (when --warmup_steps is 0)",
       kRanksAgree | kPlanLine},
      {"max_steps", &TrainArgs::max_steps, "Optimizer steps; overrides --num_train_epochs",
       kRanksAgree},
      {"num_train_epochs", &TrainArgs::num_train_epochs, "Epochs over the training split",
       kRanksAgree | kPlanLine},
      {"torch_empty_cache_steps", &TrainArgs::torch_empty_cache_steps,
       "Release the allocator's free cached segments every N steps (0: never)", kPlanLine},
      {"dataloader_num_workers", &TrainArgs::dataloader_num_workers,
       "Loader worker threads (0: batches are built on the training thread)", kPlanLine},
      {"dataloader_pin_memory", &TrainArgs::dataloader_pin_memory,
       "Stage batches in pinned host memory when the device is CUDA", kPlanLine},
      {"dataloader_prefetch_factor", &TrainArgs::dataloader_prefetch_factor,
       "Batches each worker builds ahead", kPlanLine},
      {"seed",
       &TrainArgs::seed,
       "Seeds the initialisation, the data order and dropout",
       kRanksAgree | kResumeKeeps | kPlanLine,
       {},
       u64_digits()},
      {"report_to",
       &TrainArgs::report_to,
       "Where the metrics go besides metrics.jsonl: none, or tensorboard (event files in "
       "--logging_dir)",
       kPlanLine,
       {"none", "tensorboard"}},
      {"logging_dir", &TrainArgs::logging_dir,
       "TensorBoard's folder for --report_to tensorboard (default <output_dir>/runs)", kPlanLine},
      {"logging_steps", &TrainArgs::logging_steps, "Log (and write metrics) every N steps",
       kRanksAgree | kPlanLine},
      {"eval_steps", &TrainArgs::eval_steps,
       "Validation loss and perplexity every N steps (0: as --logging_steps)",
       kRanksAgree | kPlanLine},
      {"eval_strategy",
       &TrainArgs::eval_strategy,
       "steps (evaluate every --eval_steps and at the end) or no (never evaluate)",
       kRanksAgree,
       {"steps", "no"}},
      {"eval_max_batches", &TrainArgs::eval_max_batches,
       "Validation batches per evaluation (0: the whole split)", kRanksAgree | kPlanLine},
      {"save_steps", &TrainArgs::save_steps, "Checkpoint every N steps (0: only at the end)",
       kRanksAgree | kPlanLine},
      {"save_strategy",
       &TrainArgs::save_strategy,
       "steps (every --save_steps and at the end) or no (never write a checkpoint)",
       kRanksAgree | kPlanLine,
       {"steps", "no"}},
      {"save_total_limit", &TrainArgs::save_total_limit,
       "Keep only the newest N checkpoints (0: keep all)", kRanksAgree | kPlanLine},
      {"resume_from_checkpoint", &TrainArgs::resume_from_checkpoint,
       "A checkpoint directory, or `last` for the newest one in --output_dir", kRanksAgree},
      {kSkipVerificationFlag + 2, &TrainArgs::skip_checkpoint_verification, kSkipVerificationHelp,
       0},
      {"overwrite_output_dir", &TrainArgs::overwrite_output_dir,
       "Allow a fresh run into an --output_dir that already holds checkpoints", kRanksAgree},
      {"ddp_timeout", &TrainArgs::ddp_timeout,
       "Under a launcher: seconds a collective may wait for the other ranks before the run fails "
       "with an error naming the rank",
       kRanksAgree | kPlanLine},
      {"ddp_bucket_cap_mb", &TrainArgs::ddp_bucket_cap_mb,
       "Under a launcher: MiB of gradients per all-reduce bucket (the first bucket 1 MiB)",
       kRanksAgree | kPlanLine},
      {"zero_stage",
       &TrainArgs::zero_stage,
       "Under a launcher: 1 shards the optimizer state across the ranks, 2 the gradients too "
       "(ZeRO; each parameter owned by one rank)",
       kRanksAgree | kPlanLine,
       {},
       number_in(0, 2)},
      {"progress",
       &TrainArgs::progress,
       "auto (a live bar on a terminal, log lines otherwise), bar or plain",
       0,
       {"auto", "bar", "plain"}},
  };
  return table;
}

namespace {

// A value as JSON: a bool as 0 or 1 and the seed as a signed integer, as trainer_state.json
// has always written them.
nlohmann::json value_json(const TrainFlag& f, const TrainArgs& a) {
  return std::visit(
      [&](auto member) -> nlohmann::json {
        const auto& v = a.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>)
          return int64_t(v);
        else if constexpr (std::is_same_v<T, uint64_t>)
          return int64_t(v);
        else
          return v;
      },
      f.field);
}

std::string shown(const nlohmann::json& j) {
  if (!j.is_string()) return j.dump();
  const std::string s = j.get<std::string>();
  return s.empty() ? "''" : s;
}

// `s` as one shell word.
std::string shell_word(const std::string& s) {
  if (!s.empty() &&
      s.find_first_not_of(
          "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+.,/:=@%") ==
          std::string::npos)
    return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

const TrainFlag& train_flag(std::string_view name) {
  const auto f = std::find_if(train_flags().begin(), train_flags().end(),
                              [&](const TrainFlag& g) { return g.name == name; });
  FG_ASSERT(f != train_flags().end());
  return *f;
}

void check_needs(const TrainArgs& a) {
  for (const TrainFlag& f : train_flags()) {
    if (f.needs.empty() || is_default(f, a) || !is_default(train_flag(f.needs), a)) continue;
    throw Error(fmt::format(
        "[train] --{} needs --{}: without it --{} {} does nothing; give --{} as well, or drop "
        "--{}",
        f.name, f.needs, f.name, flag_text(f, a), f.needs, f.name));
  }
  // The flags only one objective reads (train/objectives/registry.h).
  for (const ObjectiveEntry& e : objectives())
    for (const std::string& flag : e.flags)
      FG_CHECK(e.name == a.objective || is_default(train_flag(flag), a),
               "[train] --{} is --objective {}'s; --objective {} does not read it: leave it out",
               flag, e.name, a.objective);
}

void check_values(const TrainArgs& a) {
  for (const TrainFlag& f : train_flags()) {
    if (is_default(f, a)) continue;
    const std::string text = flag_text(f, a);
    if (!f.choices.empty() &&
        std::find(f.choices.begin(), f.choices.end(), text) == f.choices.end())
      throw Error(
          fmt::format("[train] --{} {}: not one of {}", f.name, text, fmt::join(f.choices, ", ")));
    if (!f.check) continue;
    const std::string error = f.check->error(text);
    if (!error.empty()) throw Error(fmt::format("[train] --{} {}", f.name, error));
  }
}

std::string flag_text(const TrainFlag& f, const TrainArgs& a) {
  return std::visit(
      [&](auto member) -> std::string {
        const auto& v = a.*member;
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>)
          return v ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>)
          return v;
        else
          return fmt::format("{}", v);
      },
      f.field);
}

std::string flag_argument(const TrainFlag& f, const TrainArgs& a) {
  if (std::holds_alternative<bool TrainArgs::*>(f.field))
    return a.*std::get<bool TrainArgs::*>(f.field) ? "--" + f.name : "--" + f.name + " false";
  return "--" + f.name + " " + shell_word(flag_text(f, a));
}

bool is_default(const TrainFlag& f, const TrainArgs& a) {
  return flag_text(f, a) == flag_text(f, TrainArgs());
}

std::vector<std::string> flags_items(const TrainArgs& a, int world_size, Device device) {
  std::vector<std::string> items = {fmt::format("world size {}", world_size)};
  for (const TrainFlag& f : train_flags()) {
    if (!(f.traits & kRanksAgree)) continue;
    const bool own_card = f.name == "device" && device.type == DeviceType::cuda;
    items.push_back(fmt::format("--{} {}", f.name,
                                own_card ? std::string("cuda") : shell_word(flag_text(f, a))));
  }
  return items;
}

std::string flags_fingerprint(const TrainArgs& a, int world_size, Device device) {
  return fmt::format("{}", fmt::join(flags_items(a, world_size, device), " "));
}

nlohmann::json run_arguments(const TrainArgs& a, int world_size) {
  nlohmann::json j = {{"world_size", world_size}};
  for (const TrainFlag& f : train_flags()) j[f.name] = value_json(f, a);
  return j;
}

void check_resume_keeps(const nlohmann::json& saved, const TrainArgs& a,
                        const std::string& checkpoint) {
  for (const TrainFlag& f : train_flags()) {
    if (!(f.traits & kResumeKeeps) || !saved.contains(f.name)) continue;
    const nlohmann::json now = value_json(f, a);
    if (saved.at(f.name) != now)
      throw Error(fmt::format(
          "[train] --resume_from_checkpoint {}: --{} was {} there and is {} now; a resume keeps it "
          "(Note [Bitwise resume]): resume with --{} {}, or start a new run",
          checkpoint, f.name, shown(saved.at(f.name)), shown(now), f.name,
          shown(saved.at(f.name))));
  }
}

}  // namespace fitgrad::train
