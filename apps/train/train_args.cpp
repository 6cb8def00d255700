// The `fitgrad train` options and their checks (train_args.h).
#include "apps/train/train_args.h"

#include <fmt/format.h>

#include <cmath>

#include "apps/chat_prompt.h"
#include "apps/cli_checks.h"
#include "apps/model_source.h"
#include "apps/train/checkpoint_dir.h"
#include "optim/factory.h"
#include "tensor/device.h"
#include "tensor/error.h"
#include "tensor/memory/bytes.h"

namespace fitgrad::apps {
namespace {

// A Hugging Face style boolean: `--flag`, `--flag true`, `--flag=False`.
void add_bool(CLI::App& cmd, const std::string& name, bool& value, const std::string& help) {
  cmd.add_flag("--" + name, value, help)->expected(0, 1);
}

[[noreturn]] void fail(const std::string& flag, const std::string& what) {
  throw Error(fmt::format("[train] --{} {}", flag, what));
}

// Note [Numeric flag ranges]
// Every numeric flag has a stated range, checked before anything is allocated, so that a
// value like 9223372036854775807, inf or 1e300 is refused by name instead of overflowing a
// step count or never finishing. The upper bounds are far above any real run (a million
// accumulation steps, a trillion optimizer steps) and below the sizes that overflow.
constexpr int64_t kMaxCount = int64_t(1) << 40;  // steps, batches, intervals
void require_in(const std::string& flag, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi) fail(flag, fmt::format("must be in [{}, {}], got {}", lo, hi, v));
}

void require_positive(const std::string& flag, int64_t v, int64_t hi = kMaxCount) {
  if (v < 1 || v > hi) fail(flag, fmt::format("must be in [1, {}], got {}", hi, v));
}

// A finite number in [0, hi] (hi = inf: no upper bound besides finiteness).
void require_non_negative(const std::string& flag, double v, double hi = 1e300) {
  if (!(v >= 0 && v <= hi && std::isfinite(v)))
    fail(flag, fmt::format("must be a finite number in [0, {}], got {}", hi, v));
}

}  // namespace

void add_train_options(CLI::App& cmd, TrainArgs& a) {
  cmd.add_option("--model", a.model,
                 std::string(kModelSpecHelp) + " (presets: `fitgrad train --help` footer)")
      ->capture_default_str();
  cmd.add_option("--init", a.init, kInitHelp);
  cmd.add_option("--data", a.data,
                 "A UTF-8 text file or a folder of them (required, except for --device meta, "
                 "which sizes its batches from it when given)");
  cmd.add_option("--output_dir", a.output_dir,
                 "Where checkpoints, metrics, the loss curve and the memory trace go")
      ->required();
  cmd.add_option("--seq_len", a.seq_len, "Tokens per training sequence")->capture_default_str();
  cmd.add_option("--device", a.device,
                 "cpu, cuda:N, or meta: a dry run that allocates as the real run does and "
                 "computes nothing (needs --max_steps or --data; writes only the memory record)")
      ->capture_default_str();
  cmd.add_option("--memory_budget", a.memory_budget,
                 "Device memory capacity enforced by the allocator, such as 24GiB");
  cmd.add_option("--allocator", a.allocator,
                 "native (a segment per raw allocation) or expandable (each stream's large "
                 "pool is one segment whose mapping grows by 2 MiB granules, so freed "
                 "neighbours always merge)")
      ->capture_default_str();
  cmd.add_option("--data_order", a.data_order, "random (seeded) or sequential")
      ->check(CLI::IsMember({"random", "sequential"}))
      ->capture_default_str();
  CLI::Option* val_fraction =
      cmd.add_option("--val_fraction", a.val_fraction,
                     "Fraction of the tokens (the end of the data) held out for validation; of the "
                     "examples, for instruction data")
          ->capture_default_str();
  cmd.add_option_function<double>(
         "--validation_split_percentage", [&a](double p) { a.val_fraction = p / 100; },
         "--val_fraction in percent (transformers' run_clm name)")
      ->excludes(val_fraction);
  cmd.add_option("--eval_data", a.eval_data,
                 "Instruction data (.jsonl / .json, a file or a folder) to validate on instead of "
                 "a split of --data");
  cmd.add_option("--eval_prompts", a.eval_prompts,
                 "A .jsonl of prompts (conversations, or {\"prompt\": text}) the model completes "
                 "at each evaluation, into metrics.jsonl and eval_samples.jsonl");
  cmd.add_option("--eval_max_new_tokens", a.eval_max_new_tokens,
                 "Tokens at most in each --eval_prompts completion")
      ->capture_default_str();
  // Instruction and chat data (apps/train/train_sft.h): TRL's and transformers' names.
  cmd.add_option("--dataset_format", a.dataset_format,
                 "For .jsonl / .json data: auto (detected per file), text, alpaca, sharegpt, "
                 "messages, prompt_completion or preference (prompt, chosen, rejected)")
      ->check(CLI::IsMember(
          {"auto", "text", "alpaca", "sharegpt", "messages", "prompt_completion", "preference"}))
      ->capture_default_str();
  cmd.add_option("--dataset_text_field", a.dataset_text_field,
                 "The field of a text record that holds its text")
      ->capture_default_str();
  cmd.add_option("--train_on", a.train_on,
                 "Which tokens of a conversation the loss learns: assistant (every assistant "
                 "turn), last (the last one) or all")
      ->check(CLI::IsMember({"assistant", "last", "all"}))
      ->capture_default_str();
  cmd.add_flag("--skip_bad_examples", a.skip_bad_examples,
               "Count and report malformed records instead of stopping at the first");
  cmd.add_option("--chat_template", a.chat_template, kChatTemplateHelp);
  cmd.add_option("--packing", a.packing,
                 "How instruction data fills the rows: bfd (whole examples, best-fit "
                 "decreasing, each attending to itself), wrapped (end to end, cut at --seq_len), "
                 "none (one padded example a row); auto: bfd, or none for plain text records. "
                 "Preference pairs: bfd packs each batch's answers into rows, none gives each "
                 "answer a row")
      ->check(CLI::IsMember({"auto", "bfd", "wrapped", "none"}))
      ->capture_default_str();
  cmd.add_option("--objective", a.objective,
                 "What the run learns: sft (the cross-entropy of the trained tokens), dpo or "
                 "orpo (preference pairs: prompt, chosen, rejected)")
      ->check(CLI::IsMember({"sft", "dpo", "orpo"}))
      ->capture_default_str();
  cmd.add_option("--beta", a.beta,
                 "DPO's beta (the strength of the reference's pull); ORPO's lambda (the weight "
                 "of the odds-ratio term)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd.add_option("--loss_type", a.loss_type, "DPO's loss: sigmoid, hinge or ipo")
      ->check(CLI::IsMember({"sigmoid", "hinge", "ipo"}))
      ->capture_default_str();
  cmd.add_option("--label_smoothing", a.label_smoothing,
                 "DPO sigmoid: the assumed share of pairs whose preference is flipped "
                 "(conservative DPO), in [0, 0.5)")
      ->check(CLI::Range(0.0, 0.4999999))
      ->capture_default_str();
  cmd.add_flag("--precompute_ref_log_probs", a.precompute_ref_log_probs,
               "DPO: compute the reference model's log-probabilities of every pair in one pass "
               "before training (kept in the output directory for a resume), so that the steps "
               "make no reference pass and a full fine-tune keeps no frozen copy of its weights");
  cmd.add_flag("--group_by_length", a.group_by_length,
               "With --packing none, or preference pairs: batch examples (pairs) of similar "
               "lengths together (as transformers' LengthGroupedSampler) and cut each batch to "
               "its longest example (its fullest row)");

  cmd.add_option("--per_device_train_batch_size", a.per_device_train_batch_size,
                 "Sequences per micro-batch")
      ->capture_default_str();
  cmd.add_option("--per_device_eval_batch_size", a.per_device_eval_batch_size,
                 "Sequences per validation batch")
      ->capture_default_str();
  cmd.add_option("--gradient_accumulation_steps", a.gradient_accumulation_steps,
                 "Micro-batches per optimizer step")
      ->capture_default_str();
  add_bool(cmd, "gradient_checkpointing", a.gradient_checkpointing,
           "Recompute each decoder block in backward instead of saving its activations");
  cmd.add_option("--checkpoint_segments", a.checkpoint_segments,
                 "With --gradient_checkpointing: checkpoint the blocks in N segments, each saving "
                 "only its input (0: every block its own segment)")
      ->capture_default_str();
  add_bool(cmd, "fused_head_loss", a.fused_head_loss,
           "Compute the head and the loss together over row chunks, never holding the (tokens, "
           "vocab) logits; backward recomputes each chunk's logits");
  cmd.add_option("--head_chunk_size", a.head_chunk_size,
                 "With --fused_head_loss: token rows per chunk (0: ceil(vocab / hidden) chunks, "
                 "so a chunk's logits are about the size of the hidden states)")
      ->capture_default_str();
  add_bool(cmd, "tiled_mlp", a.tiled_mlp,
           "Run each block's norm and MLP over tiles of the tokens, keeping only its input; "
           "backward recomputes one tile at a time");
  cmd.add_option("--mlp_tiles", a.mlp_tiles,
                 "With --tiled_mlp: tiles per block (0: ceil(tokens / hidden), as Arctic)")
      ->capture_default_str();
  add_bool(cmd, "bf16", a.bf16,
           "bf16 mixed precision: fp32 master weights, matmuls in bf16 (autocast)");
  add_bool(cmd, "fp16", a.fp16,
           "fp16 mixed precision: f16 autocast with a dynamic loss scaler (GradScaler's rules)");
  add_bool(cmd, "tf32", a.tf32,
           "TF32 matmuls (operands rounded to 10 mantissa bits, fp32 accumulation)");
  add_bool(cmd, "pure_bf16", a.pure_bf16,
           "bf16 parameters with no fp32 master copy (training and evaluation in bf16)");
  add_bool(cmd, "stochastic_rounding", a.stochastic_rounding,
           "With --pure_bf16: round each weight update stochastically (Philox, from --seed)");
  add_bool(cmd, "optim_in_backward", a.optim_in_backward,
           "Update each parameter in its gradient hook and free its gradient at once (needs "
           "--max_grad_norm 0)");
  add_bool(cmd, "offload_optimizer", a.offload_optimizer,
           "Keep the optimizer's state and a copy of the trained parameters in host memory "
           "and update them on the CPU (ZeRO-Offload; needs --device cuda, or meta to plan)");
  add_bool(cmd, "offload_activations", a.offload_activations,
           "With --gradient_checkpointing: keep the activations saved for backward in host "
           "memory, copied out and prefetched back while the card computes (on cpu: in a "
           "separate host arena, cpu:1, that the device budget does not count)");
  add_bool(cmd, "weights_int8", a.weights_int8,
           "Train every Linear of the decoder blocks in 8 bits (Q-GaLore's int8 weights: u8 "
           "codes, a scale and a zero per group, updates re-quantized stochastically)");
  cmd.add_option("--weight_group_size", a.weight_group_size,
                 "With --weights_int8: values per quantization group (Q-GaLore's default)")
      ->capture_default_str();
  cmd.add_option("--quantize", a.quantize,
                 "nf4: keep the frozen base in 4 bits (QLoRA; needs --lora_r)")
      ->check(CLI::IsMember({"", "nf4"}));
  cmd.add_option("--lora_r", a.lora_r, "LoRA rank (0: no LoRA; train every parameter)")
      ->capture_default_str();
  cmd.add_option("--lora_alpha", a.lora_alpha, "LoRA alpha (scaling alpha / r)")
      ->capture_default_str();
  cmd.add_option("--lora_dropout", a.lora_dropout, "Dropout on the LoRA input")
      ->capture_default_str();
  cmd.add_option("--lora_target", a.lora_target,
                 "PEFT target_modules: all-linear, or names such as q_proj,v_proj")
      ->capture_default_str();
  add_bool(cmd, "use_rslora", a.use_rslora, "rsLoRA scaling alpha / sqrt(r)");
  cmd.add_option("--bnb_4bit_quant_type", a.bnb_4bit_quant_type, "nf4 or fp4 (with --quantize)")
      ->check(CLI::IsMember({"nf4", "fp4"}))
      ->capture_default_str();
  add_bool(cmd, "bnb_4bit_use_double_quant", a.bnb_4bit_use_double_quant,
           "Quantize the 4-bit absmaxes too (4.127 instead of 4.5 bits per weight)");
  cmd.add_option("--optim", a.optim,
                 "Optimizer: adamw_torch (= adamw_hf, adamw_torch_fused), sgd, adamw_8bit (= "
                 "adamw_bnb_8bit, adam8bit), adafactor (torch's), adafactor_hf (transformers'), "
                 "apollo, apollo_mini, galore_adamw, galore_adamw_8bit")
      ->capture_default_str();
  cmd.add_option("--optim_args", a.optim_args,
                 "Hugging Face's optim_args, key=value,... apollo and apollo_mini: rank, scale, "
                 "scale_type (channel or tensor), update_proj_gap, proj (random), proj_type (std); "
                 "galore_adamw and galore_adamw_8bit: rank (default 128), update_proj_gap (200), "
                 "scale (0.25), proj_type (std); sgd (fitgrad's addition): momentum, dampening, "
                 "nesterov (true or false)");
  cmd.add_option("--optim_target_modules", a.optim_target_modules,
                 "Hugging Face's optim_target_modules: the modules whose 2-D weights apollo, "
                 "apollo_mini, galore_adamw and galore_adamw_8bit project, comma-separated, each "
                 "a substring of the module name or a regular expression over all of it "
                 "(apollo's default attn,mlp; required by galore)");
  cmd.add_option("--learning_rate", a.learning_rate,
                 "Peak learning rate (adafactor_hf without it: its relative step)")
      ->each([&a](const std::string&) { a.learning_rate_given = true; })
      ->capture_default_str();
  cmd.add_option("--adam_beta1", a.adam_beta1, "AdamW beta1")->capture_default_str();
  cmd.add_option("--adam_beta2", a.adam_beta2, "AdamW beta2")->capture_default_str();
  cmd.add_option("--adam_epsilon", a.adam_epsilon, "AdamW epsilon")->capture_default_str();
  cmd.add_option("--weight_decay", a.weight_decay,
                 "Decoupled weight decay (not applied to biases and norm weights)")
      ->capture_default_str();
  cmd.add_option("--max_grad_norm", a.max_grad_norm, "Gradient clipping norm (0: off)")
      ->capture_default_str();
  cmd.add_option("--lr_scheduler_type", a.lr_scheduler_type,
                 "linear, cosine, cosine_with_restarts, polynomial, constant, "
                 "constant_with_warmup, inverse_sqrt")
      ->capture_default_str();
  cmd.add_option("--warmup_steps", a.warmup_steps, "Linear warmup steps")->capture_default_str();
  cmd.add_option("--warmup_ratio", a.warmup_ratio,
                 "Warmup as a fraction of the total steps (when --warmup_steps is 0)")
      ->capture_default_str();
  cmd.add_option("--max_steps", a.max_steps, "Optimizer steps; overrides --num_train_epochs")
      ->capture_default_str();
  cmd.add_option("--num_train_epochs", a.num_train_epochs, "Epochs over the training split")
      ->capture_default_str();
  cmd.add_option("--torch_empty_cache_steps", a.torch_empty_cache_steps,
                 "Release the allocator's free cached segments every N steps (0: never)")
      ->capture_default_str();
  cmd.add_option("--dataloader_num_workers", a.dataloader_num_workers,
                 "Loader worker threads (0: batches are built on the training thread)")
      ->capture_default_str();
  add_bool(cmd, "dataloader_pin_memory", a.dataloader_pin_memory,
           "Stage batches in pinned host memory when the device is CUDA");
  cmd.add_option("--dataloader_prefetch_factor", a.dataloader_prefetch_factor,
                 "Batches each worker builds ahead")
      ->capture_default_str();
  cmd.add_option("--seed", a.seed, "Seeds the initialisation, the data order and dropout")
      ->check(u64_digits())
      ->capture_default_str();
  cmd.add_option("--report_to", a.report_to,
                 "Where the metrics go besides metrics.jsonl: none, or tensorboard (event files "
                 "in --logging_dir)")
      ->check(CLI::IsMember({"none", "tensorboard"}))
      ->capture_default_str();
  cmd.add_option("--logging_dir", a.logging_dir,
                 "TensorBoard's folder for --report_to tensorboard (default <output_dir>/runs)");
  cmd.add_option("--logging_steps", a.logging_steps, "Log (and write metrics) every N steps")
      ->capture_default_str();
  cmd.add_option("--eval_steps", a.eval_steps,
                 "Validation loss and perplexity every N steps (0: as --logging_steps)")
      ->capture_default_str();
  cmd.add_option("--eval_strategy", a.eval_strategy,
                 "steps (evaluate every --eval_steps and at the end) or no (never evaluate)")
      ->check(CLI::IsMember({"steps", "no"}))
      ->capture_default_str();
  cmd.add_option("--eval_max_batches", a.eval_max_batches,
                 "Validation batches per evaluation (0: the whole split)")
      ->capture_default_str();
  cmd.add_option("--save_steps", a.save_steps, "Checkpoint every N steps (0: only at the end)")
      ->capture_default_str();
  cmd.add_option("--save_strategy", a.save_strategy,
                 "steps (every --save_steps and at the end) or no (never write a checkpoint)")
      ->check(CLI::IsMember({"steps", "no"}))
      ->capture_default_str();
  cmd.add_option("--save_total_limit", a.save_total_limit,
                 "Keep only the newest N checkpoints (0: keep all)")
      ->capture_default_str();
  cmd.add_option("--resume_from_checkpoint", a.resume_from_checkpoint,
                 "A checkpoint directory, or `last` for the newest one in --output_dir");
  cmd.add_flag(kSkipVerificationFlag, a.skip_checkpoint_verification, kSkipVerificationHelp);
  add_bool(cmd, "overwrite_output_dir", a.overwrite_output_dir,
           "Allow a fresh run into an --output_dir that already holds checkpoints");
  cmd.add_option("--ddp_timeout", a.ddp_timeout,
                 "Under a launcher: seconds a collective may wait for the other ranks before the "
                 "run fails with an error naming the rank")
      ->capture_default_str();
  cmd.add_option(
         "--ddp_bucket_cap_mb", a.ddp_bucket_cap_mb,
         "Under a launcher: MiB of gradients per all-reduce bucket (the first bucket 1 MiB)")
      ->capture_default_str();
  cmd.add_option("--zero_stage", a.zero_stage,
                 "Under a launcher: 1 shards the optimizer state across the ranks, 2 the "
                 "gradients too (ZeRO; each parameter owned by one rank)")
      ->check(CLI::Range(0, 2))
      ->capture_default_str();
  cmd.add_option("--progress", a.progress,
                 "auto (a live bar on a terminal, log lines otherwise), bar or plain")
      ->check(CLI::IsMember({"auto", "bar", "plain"}))
      ->capture_default_str();
}

DType compute_dtype(const TrainArgs& a) {
  return a.bf16 ? DType::bf16 : a.fp16 ? DType::f16 : DType::f32;
}

void validate(const TrainArgs& a) {
  // Note [Numeric flag ranges].
  require_positive("seq_len", a.seq_len, int64_t(1) << 24);
  require_positive("per_device_train_batch_size", a.per_device_train_batch_size, int64_t(1) << 20);
  require_positive("per_device_eval_batch_size", a.per_device_eval_batch_size, int64_t(1) << 20);
  require_positive("gradient_accumulation_steps", a.gradient_accumulation_steps, 1000000);
  require_positive("logging_steps", a.logging_steps);
  require_positive("eval_max_new_tokens", a.eval_max_new_tokens);
  require_positive("dataloader_prefetch_factor", a.dataloader_prefetch_factor, 1024);
  require_positive("ddp_timeout", a.ddp_timeout, int64_t(1) << 30);
  require_positive("ddp_bucket_cap_mb", a.ddp_bucket_cap_mb, int64_t(1) << 20);
  if (a.max_steps == 0 || a.max_steps < -1 || a.max_steps > kMaxCount)
    fail("max_steps", fmt::format("must be in [1, {}] (or -1 for --num_train_epochs), got {}",
                                  kMaxCount, a.max_steps));
  if (a.max_steps < 0 && !(a.num_train_epochs > 0 && a.num_train_epochs <= 1e6))
    fail("num_train_epochs",
         fmt::format("must be a finite number in (0, 1000000] without --max_steps, got {}",
                     a.num_train_epochs));
  if (!(a.learning_rate > 0 && a.learning_rate <= 1e6))
    fail("learning_rate",
         fmt::format("must be a finite number in (0, 1000000], got {}", a.learning_rate));
  require_non_negative("weight_decay", a.weight_decay, 1e6);
  require_non_negative("max_grad_norm", a.max_grad_norm, 1e6);
  if (!(a.warmup_ratio >= 0 && a.warmup_ratio < 1))
    fail("warmup_ratio", fmt::format("must be in [0, 1), got {}", a.warmup_ratio));
  require_in("warmup_steps", a.warmup_steps, 0, kMaxCount);
  if (a.warmup_steps > 0 && a.warmup_ratio > 0)
    throw Error("[train] --warmup_steps and --warmup_ratio conflict: give one of them");
  for (auto [flag, v] : {std::pair{"adam_beta1", a.adam_beta1}, {"adam_beta2", a.adam_beta2}})
    if (!(v >= 0 && v < 1)) fail(flag, fmt::format("must be in [0, 1), got {}", v));
  if (!(a.adam_epsilon > 0 && a.adam_epsilon <= 1))
    fail("adam_epsilon", fmt::format("must be a finite number in (0, 1], got {}", a.adam_epsilon));
  if (!(a.val_fraction > 0 && a.val_fraction < 1))
    fail("val_fraction", fmt::format("must be in (0, 1), got {}", a.val_fraction));
  for (auto [flag, v] : {std::pair{"torch_empty_cache_steps", a.torch_empty_cache_steps},
                         {"eval_steps", a.eval_steps},
                         {"eval_max_batches", a.eval_max_batches},
                         {"save_steps", a.save_steps},
                         {"save_total_limit", a.save_total_limit},
                         {"checkpoint_segments", a.checkpoint_segments},
                         {"head_chunk_size", a.head_chunk_size},
                         {"mlp_tiles", a.mlp_tiles}})
    require_in(flag, v, 0, kMaxCount);
  if (a.checkpoint_segments > 0 && !a.gradient_checkpointing)
    fail("checkpoint_segments", "needs --gradient_checkpointing");
  if (a.head_chunk_size > 0 && !a.fused_head_loss)
    fail("head_chunk_size", "needs --fused_head_loss");
  if (a.mlp_tiles > 0 && !a.tiled_mlp) fail("mlp_tiles", "needs --tiled_mlp");
  if (a.eval_strategy != "steps" && a.eval_strategy != "no")
    fail("eval_strategy", fmt::format("must be steps or no, got '{}'", a.eval_strategy));
  // Each worker is a thread holding prefetched batches; more than this only costs memory.
  require_in("dataloader_num_workers", a.dataloader_num_workers, 0, 64);
  // Note [One validation]
  // memplan plans a run by running it on meta (Note [Dry run on meta]), and a plan must be
  // refused exactly when the run would be: the checks that depend on the device (offload
  // needs a card) read the device planned for, memplan's --device, not meta.
  const Device device = Device::parse(a.device);
  const Device target = a.planned_device.empty() ? device : Device::parse(a.planned_device);
  if (device.type == DeviceType::meta) {
    // Note [Dry run on meta] in apps/train/train_run.h.
    if (a.max_steps < 0 && a.data.empty())
      fail("max_steps",
           "is needed with --device meta and no --data: a dry run without data has no "
           "epochs to count");
    if (!a.resume_from_checkpoint.empty())
      throw Error(
          "[train] --resume_from_checkpoint and --device meta conflict: a dry run "
          "reads no checkpoint");
  } else if (a.data.empty()) {
    fail("data", "is required (a text file or a folder of them), except for --device meta");
  }
  if (a.save_strategy != "steps" && a.save_strategy != "no")
    fail("save_strategy", fmt::format("must be steps or no, got '{}'", a.save_strategy));
  if (!a.memory_budget.empty()) parse_bytes(a.memory_budget);
  if (a.allocator != "native" && a.allocator != "expandable")
    fail("allocator", fmt::format("must be native or expandable, got '{}'", a.allocator));
  optim::check_optimizer_extras(a.optim, {a.optim_args, a.optim_target_modules, a.seed});
  // Note [Flags fitgrad accepts but cannot honour yet].
  if (a.bf16 && a.fp16) throw Error("[train] --bf16 and --fp16 conflict: choose one precision");
  if (a.pure_bf16 && (a.bf16 || a.fp16))
    throw Error(
        fmt::format("[train] --pure_bf16 and --{} conflict: pure bf16 has no fp32 "
                    "master weights to autocast from",
                    a.bf16 ? "bf16" : "fp16"));
  if (a.stochastic_rounding && !a.pure_bf16)
    throw Error(
        "[train] --stochastic_rounding needs --pure_bf16: only bf16 parameters are rounded");
  if (a.optim_in_backward && a.max_grad_norm > 0)
    throw Error(fmt::format(
        "[train] --optim_in_backward cannot clip by the global norm (--max_grad_norm {}): every "
        "gradient would be needed before the first update; pass --max_grad_norm 0",
        a.max_grad_norm));
  if (!a.quantize.empty() && a.lora_r == 0)
    throw Error(
        "[train] --quantize nf4 needs --lora_r: a 4-bit base is frozen, so only LoRA adapters "
        "can train");
  require_in("lora_r", a.lora_r, 0, 4096);
  require_in("weight_group_size", a.weight_group_size, 1, int64_t(1) << 30);
  if (a.weights_int8) {
    if (!a.quantize.empty() || a.lora_r > 0)
      throw Error(fmt::format(
          "[train] --weights_int8 and --{} conflict: int8 weights train the whole model, a "
          "LoRA run trains adapters over a frozen base",
          a.lora_r > 0 ? "lora_r" : "quantize"));
    if (a.offload_optimizer)
      throw Error(
          "[train] --weights_int8 and --offload_optimizer conflict: the int8 update runs "
          "where the weights are");
  }
  if (a.lora_r > 0) {
    if (!(a.lora_alpha > 0 && a.lora_alpha <= 1e6))
      fail("lora_alpha",
           fmt::format("must be a finite number in (0, 1000000], got {}", a.lora_alpha));
    if (!(a.lora_dropout >= 0 && a.lora_dropout < 1))
      fail("lora_dropout", fmt::format("must be in [0, 1), got {}", a.lora_dropout));
  }
  if (a.optim.starts_with("galore_") && a.lora_r > 0)
    throw Error(fmt::format(
        "[train] --optim {} and --lora_r conflict: GaLore projects the gradients of full "
        "weights, LoRA trains adapters beside frozen ones",
        a.optim));
  if (a.optim_in_backward && a.fp16)
    throw Error(
        "[train] --optim_in_backward and --fp16 conflict: the loss scaler decides to skip a "
        "step only once every gradient is known");
  if (a.offload_activations) {
    if (!a.gradient_checkpointing)
      fail("offload_activations",
           "needs --gradient_checkpointing: it offloads the checkpointed activations");
  }
  if (a.offload_optimizer) {
    if (a.optim_in_backward)
      throw Error(
          "[train] --offload_optimizer and --optim_in_backward conflict: the offloaded update "
          "runs on the host after the backward");
    if (target.type == DeviceType::cpu)
      fail("offload_optimizer",
           "needs --device cuda (or meta to plan it): on cpu the parameters are host memory "
           "already");
  }
}

}  // namespace fitgrad::apps
