// The options of `fitgrad train` (each a row of the flag table, train_flags.h), named as in Hugging Face TrainingArguments where one
// exists there (--per_device_train_batch_size, --gradient_accumulation_steps, ...), plus
// fitgrad's own (--model, --init, --data, --seq_len, --device, --memory_budget,
// --data_order). --device meta is the dry run of Note [Dry run on meta] in
// train/train_run.h. Defaults are Hugging Face's, except where a note below says otherwise.
//
// Note [Flags fitgrad accepts but cannot honour yet]
// --optim names Hugging Face knows but fitgrad does not implement yet (optim/factory.h)
// parse, and fail before anything is allocated with an error that says so; nothing ever
// silently trains with another optimizer. --bf16 runs the step under autocast (Note
// [Autocast] in autograd/autocast.h: fp32 master weights, bf16 matmuls); --fp16 the same in
// f16 with the dynamic loss scaler (Note [Dynamic loss scaling] in optim/loss_scaler.h);
// --tf32 turns on the TF32 matmul mode for the run (Note [TF32 on the CPU] in
// tensor/cpu/gemm.h).
//
// Note [Pure bf16]
// --pure_bf16 builds (or loads) the model with bf16 parameters and no fp32 master copy:
// weights, gradients and activations are bf16, and the optimizer updates the bf16 weights
// in place (its moments stay f32; Adam8bit's are 8-bit, Adafactor's factored). An update
// below half a bf16 ulp is then lost to round-to-nearest; --stochastic_rounding rounds each
// updated weight up or down at random instead (Note [Stochastic rounding of updates] in
// optim/optimizer.h), reproducibly from --seed and resumably from the checkpoint. Hugging
// Face's --bf16_full_eval only evaluates in bf16; here training does too.
//
// Note [Int8 weight training]
// --weights_int8 stores every trainable Linear weight of the decoder blocks (PEFT's
// all-linear: not the head, not the embeddings or norms) in 8 bits with an f32 scale and a
// u8 zero per --weight_group_size values (nn/int8_linear.h), as Q-GaLore's int8 weight
// training does; each update is applied in f32 and re-quantized stochastically (Note [Int8
// updates] in optim/optimizer.h), with any optimizer, under --bf16 autocast or --pure_bf16.
// The name says what is stored, as --pure_bf16 does (Q-GaLore spells it --weight_quant
// --weight_bits 8 --stochastic_round, and only 8 bits exist here); --weight_group_size is
// Q-GaLore's own flag, with its default 256. It trains the whole model, so it excludes
// LoRA, --quantize and --offload_optimizer.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "tensor/backend/profile.h"
#include "tensor/dtype.h"

namespace fitgrad::train {

struct TrainArgs {
  // What to train, on what.
  std::string model = "gpt2-tiny";  // a preset, a config.json, a checkpoint dir or a .gguf
  std::string init;                 // weights to start from: .safetensors or .gguf
  std::string data;                 // a text file or a folder of them
  std::string output_dir;
  int64_t seq_len = 256;
  std::string device = "cpu";
  std::string memory_budget;          // "" = unlimited; else a capacity such as 24GiB
  std::string allocator = "native";   // native | expandable (Note [Expandable segments])
  std::string data_order = "random";  // random | sequential
  double val_fraction = 0.05;
  // Instruction and chat data (train/train_sft.h).
  std::string dataset_format =
      "auto";  // auto | text | alpaca | sharegpt | messages | prompt_completion
  std::string dataset_text_field = "text";
  std::string train_on = "assistant";  // assistant | last | all
  bool skip_bad_examples = false;
  std::string chat_template;     // a file; "" = the model's
  std::string packing = "auto";  // auto | bfd | wrapped | none (data/sft_stream.h)
  bool group_by_length = false;  // --packing none: batches of similar lengths, cut to their longest
  // The objective (train/objectives/registry.h) and its settings, TRL's names (DPOConfig,
  // ORPOConfig, KTOConfig, GRPOConfig).
  std::string objective = "sft";
  // DPO's, KTO's and GRPO's beta; ORPO's lambda. An objective whose default differs (GRPO's
  // 0) takes its own when beta is at this value and beta_given is false (objective_beta in
  // train/objectives/registry.h).
  double beta = 0.1;
  bool beta_given = false;                // not a flag: --beta was on the command line
  std::string loss_type = "";             // "": the objective's (DPO sigmoid, KTO kto, GRPO dapo)
  double label_smoothing = 0.0;           // DPO's sigmoid loss, in [0, 0.5)
  double desirable_weight = 1.0;          // KTO: the weight of a desirable example's loss
  double undesirable_weight = 1.0;        // KTO: the weight of an undesirable example's loss
  bool precompute_ref_log_probs = false;  // DPO: the reference's log-probabilities first
  // GRPO (train/objectives/grpo.h), TRL 1.16 GRPOConfig's names and defaults.
  int64_t num_generations = 8;          // G: completions sampled per prompt
  int64_t max_completion_length = 512;  // tokens per completion, the stop token included
  double temperature = 1.0;             // sampling temperature (also the loss's)
  double top_p = 1.0;                   // nucleus sampling; 1: off
  int64_t top_k = 0;                    // 0: off
  int64_t generation_batch_size = 0;    // rows decoded at once; 0: per-device batch x accumulation
  std::string reward_funcs;             // built-ins, comma separated (train/rewards/reward_funcs.h)
  std::string reward_weights;           // floats, comma separated, one per reward; "": all 1
  std::string reward_command;           // a user's reward program (train/rewards/reward_command.h)
  double reward_timeout = 60;           // seconds a --reward_command batch may take
  double epsilon = 0.2;                 // the ratio's lower clip
  std::string epsilon_high;             // the ratio's upper clip; "": epsilon
  int64_t num_iterations = 1;           // trainings of each generation batch
  std::string scale_rewards = "group";  // group | batch | none
  std::string importance_sampling_level = "token";  // token | sequence (GSPO)
  bool mask_truncated_completions = false;
  std::string eval_data;     // instruction data to validate on; "" = a split of --data
  std::string eval_prompts;  // prompts completed at each evaluation (train/eval_prompts.h)
  int64_t eval_max_new_tokens = 64;

  // Hugging Face TrainingArguments.
  int64_t per_device_train_batch_size = 8;
  int64_t per_device_eval_batch_size = 8;
  int64_t gradient_accumulation_steps = 1;
  bool gradient_checkpointing = false;
  // fitgrad: with --gradient_checkpointing, the blocks grouped into this many checkpointed
  // segments (0: each block its own segment, as Hugging Face checkpoints every layer).
  int64_t checkpoint_segments = 0;
  // fitgrad (issue 27; Note [Row-chunked head and MLP] in nn/decoder.h): the head and the
  // loss fused over row chunks (Liger's and Unsloth's fused cross-entropy), and each block's
  // MLP over sequence tiles (Unsloth's tiled MLP, Arctic's TiledMLP); 0 sizes: the rules.
  bool fused_head_loss = false;
  int64_t head_chunk_size = 0;
  bool tiled_mlp = false;
  int64_t mlp_tiles = 0;
  bool bf16 = false;
  bool fp16 = false;
  bool tf32 = false;
  bool pure_bf16 = false;            // fitgrad: bf16 parameters, no fp32 master copy
  bool stochastic_rounding = false;  // fitgrad: with --pure_bf16, round updates at random
  bool optim_in_backward = false;    // fitgrad: Note [Optimizer in backward]
  bool offload_optimizer = false;    // fitgrad: Note [Optimizer offload] (ZeRO-Offload)
  bool offload_activations = false;  // fitgrad: Note [Activation offload]
  // Note [Int8 weight training]: every Linear of the decoder blocks trained in 8 bits
  // (Q-GaLore's --weight_quant with --weight_bits 8 and --stochastic_round; the group size
  // keeps Q-GaLore's name and default).
  bool weights_int8 = false;
  int64_t weight_group_size = 256;
  // LoRA and QLoRA (PEFT's LoraConfig and transformers' BitsAndBytesConfig names; Note
  // [LoRA runs] in train/train_setup.cpp).
  std::string quantize;  // "" or nf4: the frozen base in 4 bits (fitgrad's flag)
  int64_t lora_r = 0;    // 0: no LoRA
  double lora_alpha = 16.0;
  double lora_dropout = 0.0;
  std::string lora_target = "all-linear";
  bool use_rslora = false;
  std::string bnb_4bit_quant_type = "nf4";
  bool bnb_4bit_use_double_quant = false;
  std::string optim = "adamw_torch";
  // Hugging Face's, for apollo, apollo_mini, galore_adamw and galore_adamw_8bit (optim/factory.h)
  std::string optim_args;            // "rank=1,scale=128"
  std::string optim_target_modules;  // comma-separated: "attn,mlp"
  double learning_rate = 5e-5;
  bool learning_rate_given = false;  // --learning_rate was on the command line
  double adam_beta1 = 0.9;
  double adam_beta2 = 0.999;
  double adam_epsilon = 1e-8;
  double weight_decay = 0.0;
  double max_grad_norm = 1.0;
  std::string lr_scheduler_type = "linear";
  int64_t warmup_steps = 0;
  double warmup_ratio = 0.0;
  int64_t max_steps = -1;
  double num_train_epochs = 3.0;
  int64_t torch_empty_cache_steps = 0;  // 0: never
  int dataloader_num_workers = 0;
  bool dataloader_pin_memory = true;
  int64_t dataloader_prefetch_factor = 2;
  uint64_t seed = 42;
  int64_t logging_steps = 500;
  std::string report_to = "none";             // none | tensorboard (Note [Metrics in TensorBoard])
  std::string logging_dir;                    // "" = <output_dir>/runs
  int64_t eval_steps = 0;                     // 0: logging_steps
  std::string eval_strategy = "steps";        // steps | no (Hugging Face's; its default is "no")
  int64_t eval_max_batches = 50;              // fitgrad: caps each evaluation (0: the whole split)
  int64_t save_steps = 500;                   // 0: only the final checkpoint
  std::string save_strategy = "steps";        // steps | no (Hugging Face's; "epoch" is not offered)
  int64_t save_total_limit = 0;               // 0: keep every checkpoint
  std::string resume_from_checkpoint;         // a checkpoint dir, or "last" (newest in output_dir)
  bool skip_checkpoint_verification = false;  // Note [Verified reads] (checkpoint_dir.h)
  bool overwrite_output_dir = false;
  // Data parallelism under a launcher (Note [Data-parallel runs] in train/train_dist.h),
  // Hugging Face's names and defaults.
  int64_t ddp_timeout = 1800;      // seconds a collective waits for the other ranks
  int64_t ddp_bucket_cap_mb = 25;  // Note [DDP buckets] in dist/ddp.h
  int64_t zero_stage = 0;          // 0 (DDP), 1 or 2: Note [ZeRO by whole parameters]
  std::string progress = "auto";   // auto | bar | plain
  // Not a flag: memplan's search plans many candidates and writes no memory record for them.
  bool write_memory_record = true;
  // Not a flag: the device a dry run on meta plans for (memplan's --device: cpu or cuda), so
  // that validate() refuses a plan exactly when it refuses the run (Note [One validation]).
  std::string planned_device;
  // Not a flag: the capacity in bytes a memplan plan has (0: --memory_budget's, if any).
  int64_t planned_capacity = 0;
  // Not a flag: the target a memplan plan sizes its workspaces for (meta's profile during the
  // run: TrainRun::meta_target); none: the host's.
  std::optional<backend::TargetProfile> planned_profile;
  // memplan's --world_size and --rank (not train flags): a dry run plans rank plan_rank of a
  // data-parallel job of plan_world_size ranks (Note [Planning one rank] in
  // dist/meta_group.h).
  int64_t plan_world_size = 1;
  int64_t plan_rank = 0;
  // memplan's --nnodes: the hosts the job's ranks run on, plan_world_size / plan_nnodes each
  // (the plan of a rank is the same; the suggested line is one launcher per host).
  int64_t plan_nnodes = 1;
};

// The autocast dtype of the run: bf16 with --bf16, f16 with --fp16, else f32.
DType compute_dtype(const TrainArgs& args);

// Checks values and combinations (ranges, conflicts, the flags of Note [Flags fitgrad accepts
// but cannot honour yet], and each flag's own check in the table, which the CLI also runs);
// throws fitgrad::Error "[train] --flag ...".
void validate(const TrainArgs& args);

}  // namespace fitgrad::train
