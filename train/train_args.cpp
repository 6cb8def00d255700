// The checks of `fitgrad train`'s options (train_args.h); the options themselves are
// registered from the flag table (train_flags.cpp).
#include "train/train_args.h"

#include <fmt/format.h>

#include <cmath>

#include "optim/factory.h"
#include "tensor/device.h"
#include "tensor/error.h"
#include "tensor/memory/bytes.h"
#include "train/train_flags.h"

namespace fitgrad::train {
namespace {

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
    // Note [Dry run on meta] in train/train_run.h.
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
  check_values(a);  // Note [One flag table]
  check_needs(a);
}

}  // namespace fitgrad::train
