// Setting up a `fitgrad train` run: the output directory, the memory budget, the model,
// the data and loader (not in a dry run), the optimizer, the schedule and the step, a
// resume when asked, and the summary lines.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>

#include "apps/train/checkpoint_dir.h"
#include "apps/train/train_run.h"
#include "autograd/checkpoint.h"
#include "optim/factory.h"
#include "tensor/error.h"
#include "tensor/memory/bytes.h"
#include "tensor/random/generator.h"

namespace fitgrad::apps {
namespace fs = std::filesystem;

namespace {

// Windows of seq_len + 1 tokens with stride seq_len in n tokens (data/loader.h).
int64_t windows_in(int64_t n, int64_t seq_len) { return n > seq_len ? (n - 1) / seq_len : 0; }

void prepare_output_dir(TrainRun& r) {
  r.dir = r.a.output_dir;
  std::error_code ec;
  fs::create_directories(r.dir, ec);
  if (ec || !fs::is_directory(r.dir))
    throw Error(fmt::format("[train] --output_dir {}: cannot create ({})", r.a.output_dir,
                            ec ? ec.message() : "not a directory"));
  if (r.a.resume_from_checkpoint.empty() && !r.a.overwrite_output_dir) {
    auto existing = list_checkpoints(r.a.output_dir);
    if (!existing.empty())
      throw Error(fmt::format(
          "[train] --output_dir {} already holds {}: pass --resume_from_checkpoint last to "
          "continue it, or --overwrite_output_dir to start over",
          r.a.output_dir, fs::path(existing.back().second).filename().string()));
  }
}

// The token dataset, the training loader and the evaluation batch plan.
void setup_data(TrainRun& r) {
  const TrainArgs& a = r.a;
  data::TokenDatasetOptions dopt;
  dopt.val_fraction = a.val_fraction;
  // The token cache sits beside the data (data/token_dataset.h) unless that folder is
  // read-only; then it goes into the output directory.
  fs::path data_parent = fs::absolute(a.data).parent_path();
  if (::access(data_parent.c_str(), W_OK) != 0) dopt.cache_dir = (r.dir / "data-cache").string();
  r.dataset.emplace(data::TokenDataset::open(a.data, *r.lm.tokenizer, r.lm.tokenizer_id, dopt));

  data::LoaderOptions lopt;
  lopt.batch_size = a.per_device_train_batch_size;
  lopt.seq_len = a.seq_len;
  lopt.seed = a.seed;
  lopt.order = a.data_order == "sequential" ? data::DataOrder::sequential : data::DataOrder::random;
  lopt.num_workers = a.dataloader_num_workers;
  lopt.prefetch = int(a.dataloader_prefetch_factor);
  lopt.pin_memory = a.dataloader_pin_memory && r.device.type == DeviceType::cuda;
  lopt.device = r.device;
  r.loader = std::make_unique<data::Loader>(r.dataset->train(), lopt, "train");
  r.batches_per_epoch = r.loader->batches_per_epoch();

  const int64_t val_windows = windows_in(int64_t(r.dataset->val().size()), a.seq_len);
  if (val_windows == 0)
    throw Error(fmt::format(
        "[train] the validation split ({} tokens, --val_fraction {}) is shorter than one "
        "sequence of --seq_len {} + 1; raise --val_fraction or lower --seq_len",
        r.dataset->val().size(), a.val_fraction, a.seq_len));
  r.eval_batch = std::min(a.per_device_eval_batch_size, val_windows);
  r.eval_batches = val_windows / r.eval_batch;
  if (a.eval_max_batches > 0) r.eval_batches = std::min(r.eval_batches, a.eval_max_batches);
}

void print_summary(TrainRun& r, int64_t warmup) {
  const TrainArgs& a = r.a;
  const nn::CausalLM& model = *r.lm.model;
  r.out << fmt::format("model: {}\nparameters: {} ({} of f32 weights)\n", r.lm.description,
                       model.num_parameters(), format_bytes(model.num_parameters() * 4));
  if (r.dry_run)
    r.out << "dry run on meta: no data is read, no losses exist and no checkpoint is written; "
             "the memory record is the real run's\n";
  else
    r.out << fmt::format("data: {} -> {} tokens ({}; {} train, {} validation), tokenizer {}\n",
                         a.data, r.dataset->num_tokens(),
                         r.dataset->built() ? "tokenized now" : "from the cache",
                         r.dataset->train().size(), r.dataset->val().size(), r.lm.tokenizer_id);
  r.out << fmt::format(
      "steps: {} (batch {} x {} tokens x {} accumulation; {} batches per epoch), optimizer {}, "
      "lr {} {} with {} warmup steps\n",
      r.total, a.per_device_train_batch_size, a.seq_len, a.gradient_accumulation_steps,
      r.dry_run ? std::string("no") : std::to_string(r.batches_per_epoch), a.optim, a.learning_rate,
      a.lr_scheduler_type, warmup);
  r.out << std::flush;
}

}  // namespace

void setup_run(TrainRun& r) {
  const TrainArgs& a = r.a;
  validate(a);
  prepare_output_dir(r);
  // The run's memory is its own, also when the process did other work before (the tests):
  // segments cached by earlier work are released (so the budget counts what this run
  // reserves, and the run's segment events do not depend on what ran before), the peak
  // restarts, and the mark starts the run's part of the trace.
  r.alloc.empty_cache();
  if (!a.memory_budget.empty()) r.alloc.set_capacity(parse_bytes(a.memory_budget));
  r.alloc.reset_peak_stats();
  r.alloc.mark("train: start");
  default_generator().manual_seed(a.seed);

  nn::BuildOptions build;
  build.device = r.device;
  build.seed = a.seed;
  // A resume overwrites the weights, so --init is not read then.
  r.lm = load_model(a.model, a.resume_from_checkpoint.empty() ? a.init : "", build);
  nn::CausalLM& model = *r.lm.model;
  if (a.gradient_checkpointing)
    model.set_checkpointing(autograd::SegmentPlan::count(model.num_layers()));
  if (a.seq_len > model.config().max_position_embeddings)
    throw Error(fmt::format("[train] --seq_len {} exceeds the model's context of {} positions",
                            a.seq_len, model.config().max_position_embeddings));

  if (r.dry_run) {
    r.eval_batch = a.per_device_eval_batch_size;
    r.eval_batches = a.eval_max_batches > 0 ? a.eval_max_batches : 1;
  } else {
    setup_data(r);
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
  r.optimizer = optim::make_optimizer(
      a.optim, optim::decay_groups(model.named_parameters(), a.weight_decay), oopt);
  r.schedule.emplace(
      optim::make_lr_schedule(a.lr_scheduler_type, a.learning_rate, warmup, r.total));
  r.step_fn = std::make_unique<train::TrainStep>(
      model, *r.optimizer, *r.schedule,
      train::TrainStepOptions{.gradient_accumulation_steps = a.gradient_accumulation_steps,
                              .max_grad_norm = a.max_grad_norm,
                              .compute_dtype = a.bf16 ? DType::bf16 : DType::f32});

  std::vector<nlohmann::json> history;
  if (!a.resume_from_checkpoint.empty()) {
    resume_run(r, resolve_resume_dir(a.resume_from_checkpoint, a.output_dir));
    history = r.resumed_history;
  }
  if (!r.dry_run) r.metrics.emplace((r.dir / "metrics.jsonl").string(), std::move(history));
  print_summary(r, warmup);
}

}  // namespace fitgrad::apps
