// Setting up a `fitgrad train` run: the output directory, the memory budget, the model,
// the data and its batch plan (the loader only in a real run), the optimizer, the schedule
// and the step, a resume when asked; then the summary lines (train_summary.h).
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "autograd/checkpoint.h"
#include "data/hf_tokenizer.h"
#include "nn/int8_linear.h"
#include "nn/lora.h"
#include "nn/nf4_linear.h"
#include "nn/target_modules.h"
#include "optim/factory.h"
#include "tensor/error.h"
#include "tensor/memory/bytes.h"
#include "tensor/random/generator.h"
#include "train/activation_offload.h"
#include "train/checkpoint_dir.h"
#include "train/objectives/registry.h"
#include "train/train_dist.h"
#include "train/train_run.h"
#include "train/train_sft.h"
#include "train/train_summary.h"

namespace fitgrad::train {
namespace fs = std::filesystem;

namespace {

bool within(const fs::path& inner, const fs::path& outer) {
  auto normal = [](const fs::path& p) {
    std::error_code ec;
    fs::path n = fs::weakly_canonical(fs::absolute(p), ec).lexically_normal();
    return n.filename().empty() ? n.parent_path() : n;  // "dir/" -> "dir"
  };
  const fs::path rel = normal(inner).lexically_relative(normal(outer));
  return !rel.empty() && *rel.begin() != "..";
}

// Note [Whose checkpoints]
// An output directory holds one run. A fresh run into a directory with checkpoints needs
// --overwrite_output_dir, and then the old checkpoints and metrics.jsonl are moved into
// <output_dir>/overwritten-<time>-<pid>/ (nothing is deleted), and the run says so. A
// resume continues only the newest checkpoint of its directory: resuming an older one
// while later ones exist, or resuming another directory's checkpoint into one that holds
// checkpoints, would mix two runs, so it is refused unless --overwrite_output_dir moves
// the others aside first.
// The files that say a run ran besides its checkpoints: its metrics, loss curve, evaluation
// samples, TensorBoard events and memory record.
constexpr const char* kRunRecords[] = {"metrics.jsonl",     "loss_curve.svg", "eval_samples.jsonl",
                                       "samples.jsonl",     "runs",           "memory.json",
                                       "memory_trace.json", "memory.html",    "peak_report.txt",
                                       "memory_summary.txt"};

void move_aside(TrainRun& r, const std::vector<std::pair<int64_t, std::string>>& checkpoints,
                bool with_metrics) {
  const fs::path to = r.dir / fmt::format("overwritten-{}-{}",
                                          std::chrono::duration_cast<std::chrono::seconds>(
                                              std::chrono::system_clock::now().time_since_epoch())
                                              .count(),
                                          ::getpid());
  fs::create_directories(to);
  std::string moved;
  for (const auto& [step, path] : checkpoints) {
    fs::rename(path, to / fs::path(path).filename());
    moved += (moved.empty() ? "" : ", ") + fs::path(path).filename().string();
  }
  std::error_code ec;
  if (with_metrics)
    for (const char* record : kRunRecords)
      if (fs::exists(r.dir / record, ec)) {
        fs::rename(r.dir / record, to / record);
        moved += (moved.empty() ? "" : ", ") + std::string(record);
      }
  r.out << fmt::format("--overwrite_output_dir: moved {} to {}\n", moved, to.string());
}

void prepare_output_dir(TrainRun& r) {
  const TrainArgs& a = r.a;
  r.dir = a.output_dir;
  if (!r.writes_outputs()) {  // Note [Data-parallel runs]: rank 0 has prepared the directory
    fs::create_directories(r.dir);
    if (!a.resume_from_checkpoint.empty())
      r.resume_dir = resolve_resume_dir(a.resume_from_checkpoint, a.output_dir,
                                        a.skip_checkpoint_verification);
    return;
  }
  if (!a.data.empty() && fs::is_directory(a.data) && within(r.dir, a.data))
    throw Error(fmt::format(
        "[train] --output_dir {} is inside --data {}: the run would read its own checkpoints, "
        "metrics and memory record as training text; put the output elsewhere",
        a.output_dir, a.data));
  if (!a.data.empty() && within(a.data, r.dir))
    throw Error(fmt::format(
        "[train] --data {} is inside --output_dir {}: the run's own files would become its "
        "data; keep the data outside the output directory",
        a.data, a.output_dir));
  std::error_code ec;
  fs::create_directories(r.dir, ec);
  if (ec || !fs::is_directory(r.dir))
    throw Error(fmt::format("[train] --output_dir {}: cannot create ({})", a.output_dir,
                            ec ? ec.message() : "not a directory"));
  r.lock.emplace(a.output_dir);
  const auto existing = list_checkpoints(a.output_dir);
  const std::string newest =
      existing.empty() ? "" : fs::path(existing.back().second).filename().string();
  if (r.dry_run) {
    if (!existing.empty())
      throw Error(fmt::format(
          "[train] --output_dir {} holds a run's checkpoints ({}): a dry run would replace "
          "that run's memory record; choose another --output_dir",
          a.output_dir, newest));
    // A real run saved with --save_strategy no has no checkpoint, but its metrics say it ran.
    for (const char* record : {"metrics.jsonl", "loss_curve.svg"})
      if (fs::exists(r.dir / record, ec))
        throw Error(fmt::format(
            "[train] --output_dir {} holds a real run's {}: a dry run would replace that run's "
            "memory record; choose another --output_dir",
            a.output_dir, record));
    return;
  }
  if (a.resume_from_checkpoint.empty()) {
    // A run saved with --save_strategy no, or one that died before its first save, has no
    // checkpoint, but its records say it ran: they are not replaced without a word either.
    std::string records;  // a real run's (a dry run's memory record is a plan, replaced)
    for (const char* record : {"metrics.jsonl", "loss_curve.svg", "eval_samples.jsonl"})
      if (fs::exists(r.dir / record, ec))
        records += (records.empty() ? "" : ", ") + std::string(record);
    if (existing.empty() && records.empty()) return;
    if (!a.overwrite_output_dir && !existing.empty())
      throw Error(fmt::format(
          "[train] --output_dir {} already holds {}: pass --resume_from_checkpoint last to "
          "continue it, or --overwrite_output_dir to start over (the old checkpoints are "
          "moved aside, not deleted)",
          a.output_dir, newest));
    if (!a.overwrite_output_dir)
      throw Error(fmt::format(
          "[train] --output_dir {} holds another run's {} and no checkpoint to resume from: "
          "pass --overwrite_output_dir to start over (they are moved aside, not deleted), or "
          "choose another --output_dir",
          a.output_dir, records));
    move_aside(r, existing, /*with_metrics=*/true);
    return;
  }
  r.resume_dir =
      resolve_resume_dir(a.resume_from_checkpoint, a.output_dir, a.skip_checkpoint_verification);
  auto same = [](const fs::path& x, const fs::path& y) { return within(x, y) && within(y, x); };
  // Resuming one of this directory's checkpoints conflicts only with the later ones; a
  // checkpoint from elsewhere, with every checkpoint here (Note [Whose checkpoints]).
  const bool here = same(fs::path(r.resume_dir).parent_path(), r.dir);
  int64_t resumed_step = -1;
  for (const auto& c : existing)
    if (same(c.second, r.resume_dir)) resumed_step = c.first;
  std::vector<std::pair<int64_t, std::string>> others;
  for (const auto& c : existing)
    if (!here || c.first > resumed_step) others.push_back(c);
  if (others.empty()) return;
  std::string names;
  for (const auto& c : others)
    names += (names.empty() ? "" : ", ") + fs::path(c.second).filename().string();
  if (!a.overwrite_output_dir)
    throw Error(fmt::format(
        fmt::runtime(
            here ? "[train] --resume_from_checkpoint {}: --output_dir {} holds later checkpoints "
                   "({}); resuming an older one would mix two runs: resume `last`, or pass "
                   "--overwrite_output_dir to move the later ones aside"
                 : "[train] --resume_from_checkpoint {}: --output_dir {} holds another run's "
                   "checkpoints ({}); choose an empty --output_dir, or pass --overwrite_output_dir "
                   "to move them aside"),
        r.resume_dir, a.output_dir, names));
  move_aside(r, others, /*with_metrics=*/true);
}

// Note [A dry run sizes its splits from the data]
// How many batches a run allocates depends on its data: --num_train_epochs counts steps in
// batches of the training split, and an evaluation takes min(--per_device_eval_batch_size,
// windows) sequences a batch, as many batches as the validation split's windows fill, at
// most --eval_max_batches. A dry run given --data therefore opens the token dataset as the
// real run does (tokenizing the text, or mapping the token cache and writing it when it is
// missing: host work that no ledger records) and sizes both splits with the functions the
// real run uses (data::Loader::batches_in, which also raises the loader's errors, and the
// evaluation plan below), so the two runs allocate the same batches in the same order, and
// a split too short for the flags is refused by both. Only the batches themselves are not
// read: they are meta tensors (Note [Dry run on meta] in train_run.h). Without --data a dry
// run needs --max_steps and stands for a run whose validation split holds --eval_max_batches
// full batches (1 batch when that is 0, the whole split).

// The token dataset and the run's batch plan: batches per training epoch and the
// evaluation's batches; a real run also builds its training loader.
void setup_data(TrainRun& r) {
  const TrainArgs& a = r.a;
  if (objective_entry(a.objective).data == ObjectiveData::prompts) {
    setup_grpo_data(r);  // Note [GRPO runs] in train_grpo.cpp
    return;
  }
  if (!a.eval_prompts.empty()) r.eval_prompts = read_eval_prompts(a, r.lm);
  if (is_sft_data(a)) {  // Note [Instruction data in a run] in train_sft.cpp
    // The encodings' cache sits beside the data, as the text's does, unless that folder is
    // read-only (Note [Encoded examples in the token cache] in data/sft_cache.cpp).
    const fs::path data_parent = fs::absolute(a.data).parent_path();
    const fs::path cache_dir =
        ::access(data_parent.c_str(), W_OK) == 0
            ? fs::path(fs::absolute(a.data).lexically_normal().string() + ".fitgrad-cache")
            : r.dir / "data-cache";
    r.sft.emplace(load_sft_data(a, r.lm, r.err, cache_dir.string()));
    r.train_data = {r.sft->train.tokens, r.sft->train.trained, r.sft->train.positions,
                    r.sft->train.lengths, r.sft->train.labels};
    r.val_data = {r.sft->val.tokens, r.sft->val.trained, r.sft->val.positions, r.sft->val.lengths,
                  r.sft->val.labels};
    r.packed = r.sft->packing != data::Packing::none;
    FG_CHECK(!a.group_by_length || !r.packed || r.sft->pairs,
             "[train] --group_by_length groups rows of one padded example; the rows of --packing "
             "{} are full already: add --packing none, or leave --group_by_length out",
             data::packing_name(r.sft->packing));
  } else {
    const ObjectiveData records = objective_entry(a.objective).data;
    FG_CHECK(records == ObjectiveData::tokens,
             "[train] --objective {} needs {} in a .jsonl or .json file; the text of {} has none",
             a.objective,
             records == ObjectiveData::pairs
                 ? "preference records (prompt, chosen, rejected)"
                 : "unpaired preference records (prompt, completion, label)",
             a.data);
    FG_CHECK(!a.group_by_length,
             "[train] --group_by_length groups instruction examples (.jsonl / .json); the text "
             "files of {} are one stream cut into full windows",
             a.data);
    FG_CHECK(a.packing == "auto" || a.packing == "none",
             "[train] --packing {} lays out instruction data (.jsonl / .json); the text files of "
             "{} are one stream cut into windows",
             a.packing, a.data);
    FG_CHECK(a.eval_data.empty(),
             "[train] --eval_data {} goes with instruction data (.jsonl / .json); the text of {} "
             "is validated on its last --val_fraction",
             a.eval_data, a.data);
    data::TokenDatasetOptions dopt;
    dopt.val_fraction = a.val_fraction;
    dopt.add_bos = data::vocabulary_adds_bos(r.lm.tokenizer_vocabulary);
    // The token cache sits beside the data (data/token_dataset.h) unless that folder is
    // read-only; then it goes into the output directory.
    fs::path data_parent = fs::absolute(a.data).parent_path();
    if (::access(data_parent.c_str(), W_OK) != 0) dopt.cache_dir = (r.dir / "data-cache").string();
    r.dataset.emplace(data::TokenDataset::open(a.data, *r.lm.tokenizer, r.lm.tokenizer_id, dopt));
    r.train_data = {r.dataset->train(), {}, {}, {}, {}};
    r.val_data = {r.dataset->val(), {}, {}, {}, {}};
  }

  data::LoaderOptions lopt;
  lopt.batch_size = a.per_device_train_batch_size;
  lopt.seq_len = a.seq_len;
  lopt.seed = a.seed;
  lopt.order = a.data_order == "sequential" ? data::DataOrder::sequential : data::DataOrder::random;
  lopt.num_workers = a.dataloader_num_workers;
  lopt.prefetch = int(a.dataloader_prefetch_factor);
  lopt.pin_memory = a.dataloader_pin_memory && r.device.type == DeviceType::cuda;
  lopt.device = r.device;
  if (r.group) {  // Note [Data-parallel shards] in data/loader.h
    lopt.rank = r.group->rank();
    lopt.world_size = r.group->size();
  }
  lopt.pairs = r.sft && r.sft->pairs;  // Note [Preference batches] in data/loader.h
  lopt.pack_pairs = lopt.pairs && r.packed;
  if (r.sft)
    FG_CHECK(r.sft->train.rows >= lopt.batch_size * lopt.world_size,
             "[train] the training split fills {} rows, fewer than a batch of {}{}; lower "
             "--per_device_train_batch_size or give more examples",
             r.sft->train.rows, lopt.batch_size,
             lopt.world_size > 1 ? fmt::format(" on each of {} ranks", lopt.world_size) : "");
  r.batches_per_epoch =
      data::Loader::batches_in(int64_t(r.train_data.tokens.size()), lopt, "train");
  lopt.group_by_length = a.group_by_length;
  // A dry run's loader builds its batches on the host only for their shapes (Note [Dry run on
  // meta]): rows cut to their longest example have the length the real run's have.
  if (r.dry_run) {
    lopt.device = Device::cpu();
    lopt.pin_memory = false;
    lopt.num_workers = 0;
  }
  r.loader =
      std::make_unique<data::Loader>(r.train_data.tokens, lopt, "train", r.train_data.trained,
                                     r.train_data.positions, r.train_data.lengths);
  if (!r.train_data.lengths.empty()) {
    // What cutting each batch to its longest example saves: the positions the first epoch's
    // batches compute, against rows of --seq_len.
    const int64_t padded = r.batches_per_epoch * lopt.batch_size * (lopt.pairs ? 2 : 1) * a.seq_len;
    const int64_t computed = r.loader->epoch_positions(0);
    r.sft->summary += fmt::format(
        "\nbatches {}{}: the first epoch computes {} positions, {:.1f}% of the {} in rows of "
        "--seq_len {}",
        lopt.pack_pairs ? "of answers packed into rows, cut to the fullest"
                        : "cut to their longest example",
        a.group_by_length ? ", grouped by length" : "", computed,
        100.0 * double(computed) / double(padded), padded, a.seq_len);
  }

  const int64_t val_windows =
      data::Loader::windows_in(int64_t(r.val_data.tokens.size()), a.seq_len, lopt.pairs);
  FG_CHECK(val_windows > 0 || !r.sft || a.eval_data.empty(),
           "[train] no example of --eval_data {} keeps a trained token within --seq_len {}",
           a.eval_data, a.seq_len);
  if (val_windows == 0 && r.sft)
    throw Error(fmt::format(
        "[train] the validation split (--val_fraction {} of {} examples) holds no example; raise "
        "--val_fraction",
        a.val_fraction, r.sft->train.examples + r.sft->val.examples));
  if (val_windows == 0)
    throw Error(fmt::format(
        "[train] the validation split ({} tokens, --val_fraction {}) is shorter than one "
        "sequence of --seq_len {} + 1; raise --val_fraction or lower --seq_len",
        r.val_data.tokens.size(), a.val_fraction, a.seq_len));
  r.eval_batch = std::min(a.per_device_eval_batch_size, val_windows);
  r.eval_batches = val_windows / r.eval_batch;
  if (a.eval_max_batches > 0) r.eval_batches = std::min(r.eval_batches, a.eval_max_batches);
}

}  // namespace

void setup_run(TrainRun& r) {
  const TrainArgs& a = r.a;
  validate(a);
  setup_dist(r);
  // Rank 0 prepares the directory (moves old runs aside, resolves `last`) before the others
  // look at it.
  if (!r.writes_outputs()) r.group->barrier();
  prepare_output_dir(r);
  if (r.group && r.writes_outputs()) r.group->barrier();
  // The run's memory is its own, also when the process did other work before (the tests):
  // segments cached by earlier work are released (so the budget counts what this run
  // reserves, and the run's segment events do not depend on what ran before), the peak
  // restarts, and the mark starts the run's part of the trace.
  r.alloc.empty_cache();
  if (a.planned_capacity > 0)
    r.alloc.set_capacity(a.planned_capacity);
  else if (!a.memory_budget.empty())
    r.alloc.set_capacity(parse_bytes(a.memory_budget));
  r.alloc.set_mode(parse_allocator_mode(a.allocator));
  r.alloc.reset_peak_stats();
  if (a.offload_activations) train::far_memory_allocator(r.device).reset_peak_stats();
  r.alloc.mark("train: start");
  default_generator().manual_seed(a.seed);

  nn::BuildOptions build;
  build.device = r.device;
  if (a.pure_bf16) build.dtype = DType::bf16;  // Note [Pure bf16] in train_args.h
  // Note [LoRA runs]
  // With --lora_r the model is built through PEFT's layers: every --lora_target Linear is a
  // LoraLinear whose base is dense, or NF4 with --quantize (QLoRA). The base's weights load
  // under Hugging Face names (nn/peft_load.h), an NF4 base being quantized as it loads;
  // everything but the adapters is frozen, the optimizer sees only the adapters, and a
  // checkpoint holds the adapter in PEFT's format (adapter_config.json,
  // adapter_model.safetensors) instead of the model: a resume rebuilds the base from --model
  // and --init and loads the adapter.
  std::shared_ptr<nn::TargetModules> targets;
  if (a.lora_r > 0) {
    targets = std::make_shared<nn::TargetModules>(nn::TargetModules::parse(a.lora_target));
    r.lora = nn::LoraConfig{a.lora_r, a.lora_alpha, a.lora_dropout, a.use_rslora};
    nn::LinearFactory base;
    if (!a.quantize.empty()) {
      const ops::FourBitOptions four_bit =
          nn::bnb_4bit_options(a.bnb_4bit_quant_type, a.bnb_4bit_use_double_quant, "train");
      base = nn::nf4_factory(four_bit);
      build.quantized_embedding = four_bit;  // Note [Quantizing the embedding]
    }
    // Under --quantize every frozen Linear is NF4, targeted or not, as a QLoRA base is
    // quantized whole before the adapters are added.
    build.linear_factory = nn::targeted_factory(targets, nn::lora_factory(*r.lora, base), base);
  }
  std::shared_ptr<nn::TargetModules> int8_targets;  // Note [Int8 weight training]
  if (a.weights_int8) {
    int8_targets = std::make_shared<nn::TargetModules>(nn::TargetModules::parse("all-linear"));
    build.linear_factory =
        nn::targeted_factory(int8_targets, nn::int8_factory(a.weight_group_size));
  }
  build.seed = a.seed;
  // A resume overwrites the weights, so --init is not read then -- except under LoRA, whose
  // checkpoints hold only the adapter (Note [LoRA runs]).
  // Note [Objectives as units]: its flags are checked before the model loads.
  r.objective = make_objective(a);
  FG_CHECK(!r.dry_run || r.objective->data() != ObjectiveData::prompts,
           "[train] --device meta does not plan --objective grpo yet: a dry run has no "
           "generation phase");
  r.lm = load_model(a.model, a.resume_from_checkpoint.empty() || r.lora ? a.init : "", build,
                    a.skip_checkpoint_verification, "train --model");
  nn::CausalLM& model = *r.lm.model;
  const bool referenced = r.objective->reference() == train::ObjectiveReference::model;
  FG_CHECK(!a.precompute_ref_log_probs || referenced,
           "[train] --precompute_ref_log_probs computes DPO's reference (or KTO's); --objective {} "
           "has none",
           a.objective);
  // The reference (Note [Preference steps]): a LoRA run's base with the adapter off; a full
  // fine-tune's frozen copy of the initial weights, unless precomputed before training.
  if (referenced && !r.lora && !a.precompute_ref_log_probs) {
    r.reference.model =
        load_model(a.model, a.init, build, a.skip_checkpoint_verification, "train --model").model;
    r.reference.model->freeze("*");
    r.reference.model->eval();
  }
  FG_CHECK(!a.fused_head_loss || !r.objective->needs_row_log_probs(),
           "[train] --fused_head_loss computes a mean cross-entropy without the logits; "
           "--objective {} needs each answer's log-probability: leave it out",
           a.objective);
  FG_CHECK(a.packing != "wrapped" || r.objective->data() == train::ObjectiveData::tokens,
           "[train] --packing wrapped would cut a preference answer in two, and --objective {} "
           "needs each answer whole: use --packing bfd (each batch's answers packed into rows) "
           "or none (an answer a row)",
           a.objective);
  if (targets) {
    nn::check_targets_found(*targets);
    const int64_t trainable = nn::mark_only_lora_as_trainable(model);
    int64_t all = model.num_parameters();  // the dense ones; NF4 weights are not parameters
    int64_t quantized = 0, quantized_bytes = 0;
    for (const auto& [path, m] : model.named_modules())
      if (const auto* q = dynamic_cast<const nn::FourBitWeight*>(m)) {
        quantized += q->quantized().numel();
        quantized_bytes += q->quantized().nbytes();
      }
    all += quantized;
    // PEFT's print_trainable_parameters line, then the base's storage.
    r.out << fmt::format("trainable params: {} || all params: {} || trainable%: {:.4f}\n",
                         trainable, all, 100.0 * double(trainable) / double(all));
    if (quantized > 0)
      r.out << fmt::format("base: {} weights in {} at {:.3f} bits per weight\n", quantized,
                           a.bnb_4bit_quant_type,
                           8.0 * double(quantized_bytes) / double(quantized));
  }
  if (int8_targets) {
    try {
      nn::check_targets_found(*int8_targets);
    } catch (const Error&) {
      throw Error(fmt::format(
          "[train] --weights_int8: the model {} has no Linear layer in its blocks to store in "
          "int8",
          a.model));
    }
  }
  if (a.checkpoint_segments > model.num_layers())
    throw Error(fmt::format("[train] --checkpoint_segments {} exceeds the model's {} blocks",
                            a.checkpoint_segments, model.num_layers()));
  model.set_row_chunking(
      nn::RowChunking{a.fused_head_loss, a.head_chunk_size, a.tiled_mlp, a.mlp_tiles});
  if (a.gradient_checkpointing)
    model.set_checkpointing(autograd::SegmentPlan::count(
        a.checkpoint_segments > 0 ? a.checkpoint_segments : model.num_layers()));
  if (a.seq_len > model.config().max_position_embeddings)
    throw Error(fmt::format("[train] --seq_len {} exceeds the model's context of {} positions",
                            a.seq_len, model.config().max_position_embeddings));

  if (!a.data.empty()) {
    setup_data(r);
  } else {  // a dry run without data (Note [A dry run sizes its splits from the data])
    r.eval_batch = a.per_device_eval_batch_size;
    r.eval_batches = a.eval_max_batches > 0 ? a.eval_max_batches : 1;
    // It plans the packed batches that instruction data with --packing bfd or wrapped gives.
    // Preference pairs pack each batch's answers unless --packing none.
    r.packed = r.objective->data() != train::ObjectiveData::tokens
                   ? a.packing != "none"
                   : a.packing == "bfd" || a.packing == "wrapped";
  }
  r.total = a.max_steps > 0
                ? a.max_steps
                : std::max<int64_t>(
                      1, int64_t(std::ceil(a.num_train_epochs * double(r.batches_per_epoch) /
                                           double(a.gradient_accumulation_steps))));
  const int64_t warmup =
      a.warmup_steps > 0 ? a.warmup_steps : int64_t(std::ceil(a.warmup_ratio * double(r.total)));

  optim::AdamWOptions oopt;
  oopt.lr = a.learning_rate;
  oopt.beta1 = a.adam_beta1;
  oopt.beta2 = a.adam_beta2;
  oopt.eps = a.adam_epsilon;
  oopt.weight_decay = a.weight_decay;
  // Under LoRA the optimizer sees only the adapters (Note [LoRA runs]); offloaded, it sees
  // their host masters (Note [Optimizer offload]).
  // With --weights_int8 the scales and zeros are parameters that never train (Note [Int8
  // weights as parameters]).
  const auto trained =
      r.lora || a.weights_int8 ? model.trainable_parameters() : model.named_parameters();
  if (a.offload_optimizer)
    r.offload = std::make_unique<optim::OptimizerOffload>(trained, optim::offload_host(r.device));
  r.optimizer = optim::make_optimizer(
      a.optim, optim::decay_groups(r.offload ? r.offload->host_params() : trained, a.weight_decay),
      oopt, a.learning_rate_given, {a.optim_args, a.optim_target_modules, a.seed});
  if (a.stochastic_rounding) r.optimizer->set_stochastic_rounding(a.seed);
  if (a.weights_int8) {
    std::map<std::string, ops::Int8> int8;
    for (const auto& [path, m] : model.named_modules())
      if (const auto* q = dynamic_cast<const nn::Int8Linear*>(m))
        int8.emplace(path + ".weight", q->quantized());
    r.optimizer->set_int8_weights(std::move(int8), a.seed);
  }
  r.schedule.emplace(
      optim::make_lr_schedule(a.lr_scheduler_type, a.learning_rate, warmup, r.total));
  if (a.fp16) r.scaler.emplace();
  start_data_parallel(r);
  r.step_fn = std::make_unique<train::TrainStep>(
      model, *r.optimizer, *r.schedule,
      train::TrainStepOptions{.gradient_accumulation_steps = a.gradient_accumulation_steps,
                              .max_grad_norm = a.max_grad_norm,
                              .compute_dtype = compute_dtype(a),
                              .scaler = r.scaler ? &*r.scaler : nullptr,
                              .optimizer_in_backward = a.optim_in_backward,
                              .offload = r.offload.get(),
                              .offload_activations = a.offload_activations,
                              .ddp = r.ddp.get(),
                              .zero = r.zero.get(),
                              .targets_group = r.sft ? r.group.get() : nullptr,
                              .objective = r.objective,
                              .reference_model = r.reference.model.get()});

  if (r.objective->data() == ObjectiveData::prompts) start_grpo_sampling(r);
  precompute_reference(r);  // before a resume replaces the initial weights
  std::vector<nlohmann::json> history;
  if (!r.resume_dir.empty()) {
    resume_run(r, r.resume_dir);
    history = r.resumed_history;
    if (r.offload) r.offload->sync_from_device();  // the masters take the loaded weights
  }
  if (!r.dry_run && r.writes_outputs())
    r.metrics.emplace((r.dir / "metrics.jsonl").string(), std::move(history),
                      a.report_to != "tensorboard" ? ""
                      : a.logging_dir.empty()      ? (r.dir / "runs").string()
                                                   : a.logging_dir);
  print_summary(r, warmup);
}

}  // namespace fitgrad::train
