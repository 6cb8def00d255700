// The training loop of `fitgrad train` (trainer.h).
#include "apps/train/trainer.h"

#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "apps/model_source.h"
#include "apps/train/checkpoint_dir.h"
#include "apps/train/interrupt.h"
#include "apps/train/metrics.h"
#include "apps/train/progress.h"
#include "autograd/autocast.h"
#include "autograd/autocast_cache.h"
#include "autograd/functions.h"
#include "autograd/grad_mode.h"
#include "autograd/tape.h"
#include "data/loader.h"
#include "data/token_dataset.h"
#include "io/safetensors.h"
#include "nn/config.h"
#include "optim/clip.h"
#include "optim/factory.h"
#include "optim/schedule.h"
#include "tensor/backend/math_mode.h"
#include "tensor/error.h"
#include "tensor/memory/bytes.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/export.h"
#include "tensor/random/generator.h"

namespace fitgrad::apps {
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(fmt::format("[train {}] cannot read", p.string()));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

json read_json(const fs::path& p) {
  try {
    return json::parse(read_text(p));
  } catch (const json::exception& e) {
    throw Error(fmt::format("[train {}] not valid JSON: {}", p.string(), e.what()));
  }
}

// Windows of seq_len + 1 tokens with stride seq_len in n tokens (data/loader.h).
int64_t windows_in(int64_t n, int64_t seq_len) { return n > seq_len ? (n - 1) / seq_len : 0; }

class Trainer {
 public:
  Trainer(const TrainArgs& args, std::ostream& out, std::ostream& err)
      : a_(args),
        out_(out),
        err_(err),
        device_(Device::parse(args.device)),
        alloc_(allocator_for(device_)),
        progress_(err, args.progress, &err == &std::cerr),
        capacity_before_(alloc_.capacity()),
        tf32_(args.tf32) {}
  // An in-process caller (the tests) gets the allocator's capacity back, and the math mode
  // through tf32_'s scope.
  ~Trainer() { alloc_.set_capacity(capacity_before_); }

  int run();

 private:
  void setup();
  void resume(const std::string& dir);
  double train_step();
  std::pair<double, int64_t> evaluate();
  void log_step(double interval_loss, double grad_norm);
  void save();
  void write_memory_record();
  int out_of_memory(const OutOfMemory& e, const std::string& when);
  json trainer_state() const;

  const TrainArgs& a_;
  std::ostream& out_;
  std::ostream& err_;
  Device device_;
  CachingAllocator& alloc_;
  Progress progress_;
  size_t capacity_before_;
  backend::MatmulTf32Scope tf32_;  // the run's mode, the previous one restored after
  fs::path dir_;

  LoadedModel lm_;
  std::optional<data::TokenDataset> dataset_;
  std::unique_ptr<data::Loader> loader_;
  std::unique_ptr<optim::Optimizer> optimizer_;
  std::optional<optim::LrSchedule> schedule_;
  std::optional<MetricsLog> metrics_;
  std::vector<Tensor> params_;

  int64_t step_ = 0, total_ = 0, batches_per_epoch_ = 0, eval_batches_ = 0, eval_batch_ = 0;
  int64_t last_saved_ = -1;
  double grad_norm_ = NAN;
  // Since the last logging step: summed step losses, steps, tokens, seconds.
  double interval_loss_ = 0, interval_seconds_ = 0;
  int64_t interval_steps_ = 0, interval_tokens_ = 0;
  std::vector<json> resumed_history_;
  Clock::time_point run_start_ = Clock::now();
  int64_t run_start_step_ = 0;
};

void Trainer::setup() {
  validate(a_);
  dir_ = a_.output_dir;
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || !fs::is_directory(dir_))
    throw Error(fmt::format("[train] --output_dir {}: cannot create ({})", a_.output_dir,
                            ec ? ec.message() : "not a directory"));
  if (a_.resume_from_checkpoint.empty() && !a_.overwrite_output_dir) {
    auto existing = list_checkpoints(a_.output_dir);
    if (!existing.empty())
      throw Error(fmt::format(
          "[train] --output_dir {} already holds {}: pass --resume_from_checkpoint last to "
          "continue it, or --overwrite_output_dir to start over",
          a_.output_dir, fs::path(existing.back().second).filename().string()));
  }
  if (!a_.memory_budget.empty()) {
    // The budget counts what this run reserves: segments cached by earlier work in this
    // process are released first.
    alloc_.empty_cache();
    alloc_.set_capacity(parse_bytes(a_.memory_budget));
  }
  // The run's peak is its own, also when the process did other work before (the tests).
  alloc_.reset_peak_stats();
  default_generator().manual_seed(a_.seed);

  nn::BuildOptions build;
  build.device = device_;
  build.seed = a_.seed;
  // A resume overwrites the weights, so --init is not read then.
  lm_ = load_model(a_.model, a_.resume_from_checkpoint.empty() ? a_.init : "", build);
  nn::CausalLM& model = *lm_.model;
  if (a_.gradient_checkpointing)
    model.set_checkpointing(autograd::SegmentPlan::count(model.num_layers()));
  for (auto& [name, p] : model.named_parameters()) params_.push_back(p);
  if (a_.seq_len > model.config().max_position_embeddings)
    throw Error(fmt::format("[train] --seq_len {} exceeds the model's context of {} positions",
                            a_.seq_len, model.config().max_position_embeddings));

  data::TokenDatasetOptions dopt;
  dopt.val_fraction = a_.val_fraction;
  // The token cache sits beside the data (data/token_dataset.h) unless that folder is
  // read-only; then it goes into the output directory.
  fs::path data_parent = fs::absolute(a_.data).parent_path();
  if (::access(data_parent.c_str(), W_OK) != 0) dopt.cache_dir = (dir_ / "data-cache").string();
  dataset_.emplace(data::TokenDataset::open(a_.data, *lm_.tokenizer, lm_.tokenizer_id, dopt));

  data::LoaderOptions lopt;
  lopt.batch_size = a_.per_device_train_batch_size;
  lopt.seq_len = a_.seq_len;
  lopt.seed = a_.seed;
  lopt.order =
      a_.data_order == "sequential" ? data::DataOrder::sequential : data::DataOrder::random;
  lopt.num_workers = a_.dataloader_num_workers;
  lopt.prefetch = int(a_.dataloader_prefetch_factor);
  lopt.pin_memory = a_.dataloader_pin_memory && device_.type == DeviceType::cuda;
  lopt.device = device_;
  loader_ = std::make_unique<data::Loader>(dataset_->train(), lopt, "train");
  batches_per_epoch_ = loader_->batches_per_epoch();

  int64_t val_windows = windows_in(int64_t(dataset_->val().size()), a_.seq_len);
  if (val_windows == 0)
    throw Error(fmt::format(
        "[train] the validation split ({} tokens, --val_fraction {}) is shorter than one "
        "sequence of --seq_len {} + 1; raise --val_fraction or lower --seq_len",
        dataset_->val().size(), a_.val_fraction, a_.seq_len));
  eval_batch_ = std::min(a_.per_device_eval_batch_size, val_windows);
  eval_batches_ = val_windows / eval_batch_;
  if (a_.eval_max_batches > 0) eval_batches_ = std::min(eval_batches_, a_.eval_max_batches);

  total_ = a_.max_steps > 0
               ? a_.max_steps
               : std::max<int64_t>(
                     1, int64_t(std::ceil(a_.num_train_epochs * double(batches_per_epoch_) /
                                          double(a_.gradient_accumulation_steps))));
  int64_t warmup =
      a_.warmup_steps > 0 ? a_.warmup_steps : int64_t(std::ceil(a_.warmup_ratio * double(total_)));

  optim::AdamWOptions oopt;
  oopt.lr = a_.learning_rate;
  oopt.beta1 = a_.adam_beta1;
  oopt.beta2 = a_.adam_beta2;
  oopt.eps = a_.adam_epsilon;
  oopt.weight_decay = a_.weight_decay;
  optimizer_ = optim::make_optimizer(
      a_.optim, optim::decay_groups(model.named_parameters(), a_.weight_decay), oopt);
  schedule_.emplace(
      optim::make_lr_schedule(a_.lr_scheduler_type, a_.learning_rate, warmup, total_));

  std::vector<json> history;
  if (!a_.resume_from_checkpoint.empty()) {
    std::string from = resolve_resume_dir(a_.resume_from_checkpoint, a_.output_dir);
    resume(from);
    history = resumed_history_;
  }
  metrics_.emplace((dir_ / "metrics.jsonl").string(), std::move(history));

  out_ << fmt::format("model: {}\nparameters: {} ({} of f32 weights)\n", lm_.description,
                      model.num_parameters(), format_bytes(model.num_parameters() * 4));
  out_ << fmt::format("data: {} -> {} tokens ({}; {} train, {} validation), tokenizer {}\n",
                      a_.data, dataset_->num_tokens(),
                      dataset_->built() ? "tokenized now" : "from the cache",
                      dataset_->train().size(), dataset_->val().size(), lm_.tokenizer_id);
  out_ << fmt::format(
      "steps: {} (batch {} x {} tokens x {} accumulation; {} batches per epoch), optimizer {}, "
      "lr {} {} with {} warmup steps\n",
      total_, a_.per_device_train_batch_size, a_.seq_len, a_.gradient_accumulation_steps,
      batches_per_epoch_, a_.optim, a_.learning_rate, a_.lr_scheduler_type, warmup);
  out_ << std::flush;
}

void Trainer::resume(const std::string& dir) {
  fs::path d(dir);
  json state = read_json(d / "trainer_state.json");
  try {
    const json& args = state.at("args");
    auto same = [&](const char* flag, int64_t now) {
      int64_t then = args.at(flag).get<int64_t>();
      if (then != now)
        throw Error(fmt::format(
            "[train] --resume_from_checkpoint {}: --{} was {} there and is {} now; a resume "
            "keeps it (Note [Bitwise resume])",
            dir, flag, then, now));
    };
    same("seq_len", a_.seq_len);
    same("per_device_train_batch_size", a_.per_device_train_batch_size);
    same("gradient_accumulation_steps", a_.gradient_accumulation_steps);
    same("seed", int64_t(a_.seed));
    same("bf16", int64_t(a_.bf16));
    same("tf32", int64_t(a_.tf32));
    if (state.at("tokenizer").get<std::string>() != lm_.tokenizer_id)
      throw Error(fmt::format("[train] --resume_from_checkpoint {}: tokenizer {} there, {} now",
                              dir, state.at("tokenizer").get<std::string>(), lm_.tokenizer_id));
    step_ = state.at("global_step").get<int64_t>();
    data::LoaderState ls;
    from_json(state.at("loader"), ls);
    loader_->restore(ls);
    default_generator().set_state(
        {state.at("rng").at("seed").get<uint64_t>(), state.at("rng").at("offset").get<uint64_t>()});
    resumed_history_ = state.at("log_history").get<std::vector<json>>();
  } catch (const json::exception& e) {
    throw Error(fmt::format("[train {}] malformed trainer_state.json: {}",
                            (d / "trainer_state.json").string(), e.what()));
  }
  {
    auto weights = io::SafetensorsFile::open((d / "model.safetensors").string());
    lm_.model->load(weights.tensors(), /*strict=*/true);
  }
  {
    auto opt = io::SafetensorsFile::open((d / "optimizer.safetensors").string());
    optimizer_->load_state_dict(opt.tensors());
  }
  if (step_ >= total_)
    throw Error(fmt::format(
        "[train] --resume_from_checkpoint {} is at step {}, and this run has {} steps: nothing "
        "to do (raise --max_steps or --num_train_epochs)",
        dir, step_, total_));
  last_saved_ = step_;
  run_start_step_ = step_;
  out_ << fmt::format("resumed from {} at step {}\n", dir, step_);
}

double Trainer::train_step() {
  nn::CausalLM& model = *lm_.model;
  double loss_sum = 0;
  const int64_t accum = a_.gradient_accumulation_steps;
  {
    // Held across backward too: a checkpointed segment recomputes under the same mode. The
    // cache makes each weight's compute-dtype copy once for all the micro-batches and ends
    // before the optimizer changes the weights (Note [Autocast weight cache]).
    autograd::AutocastGuard autocast(a_.bf16 ? DType::bf16 : DType::f32);
    autograd::AutocastCacheScope weight_cache;
    for (int64_t m = 0; m < accum; ++m) {
      alloc_.mark(fmt::format("step {} / forward", step_ + 1));
      data::Batch batch = loader_->next();
      Tensor loss = model.loss(batch.ids, batch.targets);
      loss_sum += loss.item();
      Tensor scaled = accum > 1 ? autograd::scale(loss, 1.0 / double(accum)) : loss;
      alloc_.mark(fmt::format("step {} / backward", step_ + 1));
      const autograd::MicroBatchScope micro_batch(m, m == accum - 1);
      autograd::backward(scaled);
    }
  }
  alloc_.mark(fmt::format("step {} / optimizer", step_ + 1));
  grad_norm_ = a_.max_grad_norm > 0 ? optim::clip_grad_norm(params_, a_.max_grad_norm) : NAN;
  optimizer_->step();
  model.zero_grad();
  return loss_sum / double(accum);
}

std::pair<double, int64_t> Trainer::evaluate() {
  autograd::NoGradGuard no_grad;
  autograd::AutocastGuard autocast(a_.bf16 ? DType::bf16 : DType::f32);
  data::LoaderOptions lopt;
  lopt.batch_size = eval_batch_;
  lopt.seq_len = a_.seq_len;
  lopt.order = data::DataOrder::sequential;
  lopt.device = device_;
  data::Loader val(dataset_->val(), lopt, "validation");
  double sum = 0;
  for (int64_t i = 0; i < eval_batches_; ++i) {
    data::Batch b = val.next();
    sum += lm_.model->loss(b.ids, b.targets).item();
  }
  return {sum / double(eval_batches_), eval_batches_ * eval_batch_ * a_.seq_len};
}

json Trainer::trainer_state() const {
  json loader;
  to_json(loader, loader_->state());
  RngState rng = default_generator().state();
  return json{
      {"global_step", step_},
      {"total_steps", total_},
      {"epoch", double(step_ * a_.gradient_accumulation_steps) / double(batches_per_epoch_)},
      {"loader", loader},
      {"rng", {{"seed", rng.seed}, {"offset", rng.offset}}},
      {"tokenizer", lm_.tokenizer_id},
      {"optimizer", optimizer_->name()},
      {"args",
       {{"model", a_.model},
        {"data", a_.data},
        {"seq_len", a_.seq_len},
        {"per_device_train_batch_size", a_.per_device_train_batch_size},
        {"gradient_accumulation_steps", a_.gradient_accumulation_steps},
        {"seed", int64_t(a_.seed)},
        {"bf16", int64_t(a_.bf16)},
        {"tf32", int64_t(a_.tf32)},
        {"learning_rate", a_.learning_rate},
        {"lr_scheduler_type", a_.lr_scheduler_type}}},
      {"log_history", metrics_->history()},
  };
}

void Trainer::save() {
  if (last_saved_ == step_) return;
  const nn::CausalLM& model = *lm_.model;
  std::string path = commit_checkpoint(a_.output_dir, step_, [&](const std::string& dir) {
    fs::path d(dir);
    io::save_safetensors((d / "model.safetensors").string(), model.named_parameters(),
                         {{"format", "pt"}});
    write_file_atomic((d / "config.json").string(),
                      nn::config_to_json(model.config()).dump(2) + "\n");
    save_tokenizer_spec(dir, lm_.tokenizer_id);
    auto state = optimizer_->state_dict();
    io::save_safetensors((d / "optimizer.safetensors").string(),
                         std::vector<std::pair<std::string, Tensor>>(state.begin(), state.end()));
    write_file_atomic((d / "trainer_state.json").string(), trainer_state().dump(1) + "\n");
  });
  last_saved_ = step_;
  prune_checkpoints(a_.output_dir, a_.save_total_limit);
  progress_.message(fmt::format("saved {}", path));
}

void Trainer::write_memory_record() {
  write_memory_json(alloc_, (dir_ / "memory.json").string());
  write_chrome_trace(alloc_, (dir_ / "memory_trace.json").string());
  write_file_atomic((dir_ / "peak_report.txt").string(), peak_report(alloc_));
  write_file_atomic((dir_ / "memory_summary.txt").string(), memory_summary(alloc_));
  write_file_atomic(
      (dir_ / "loss_curve.svg").string(),
      loss_curve_svg(metrics_ ? metrics_->history() : std::vector<json>{},
                     fmt::format("{} on {}", a_.model, fs::path(a_.data).filename().string())));
}

void Trainer::log_step(double interval_loss, double grad_norm) {
  MemoryStats st = alloc_.stats();
  json rec{{"step", step_},
           {"loss", interval_loss},
           {"learning_rate", schedule_->lr_at(step_ - 1)},
           {"epoch", double(step_ * a_.gradient_accumulation_steps) / double(batches_per_epoch_)},
           {"tokens_per_second", interval_tokens_ / std::max(interval_seconds_, 1e-9)},
           {"memory_allocated", st.allocated_bytes[kAllPools].current},
           {"memory_peak", st.allocated_bytes[kAllPools].peak}};
  if (std::isfinite(grad_norm)) rec["grad_norm"] = grad_norm;
  metrics_->append(rec);
}

int Trainer::out_of_memory(const OutOfMemory& e, const std::string& when) {
  progress_.finish();
  err_ << fmt::format("error: out of memory {}\n{}\n", when, e.what());
  write_memory_record();
  auto kept = list_checkpoints(a_.output_dir);
  err_ << (kept.empty()
               ? std::string("no checkpoint had been saved\n")
               : fmt::format("the newest checkpoint, {}, is intact\n", kept.back().second));
  err_ << fmt::format("the memory record of the run is in {}\n", dir_.string());
  return kExitOutOfMemory;
}

int Trainer::run() {
  try {
    setup();
  } catch (const OutOfMemory& e) {
    if (dir_.empty() || !fs::is_directory(dir_)) throw;
    return out_of_memory(e, "while loading the model and data");
  }
  InterruptGuard interrupt;
  const int64_t eval_every = a_.eval_steps > 0 ? a_.eval_steps : a_.logging_steps;
  const int64_t tokens_per_step =
      a_.per_device_train_batch_size * a_.seq_len * a_.gradient_accumulation_steps;
  try {
    while (step_ < total_) {
      if (int sig = InterruptGuard::received()) {
        progress_.message(
            fmt::format("signal {} received: saving a checkpoint at step {}", sig, step_));
        save();
        write_memory_record();
        progress_.finish();
        out_ << fmt::format("interrupted at step {}; resume with --resume_from_checkpoint last\n",
                            step_);
        return 128 + sig;
      }
      optimizer_->set_lr(schedule_->lr_at(step_));
      auto t0 = Clock::now();
      double loss = train_step();
      double dt = seconds_since(t0);
      ++step_;
      if (!std::isfinite(loss))
        progress_.message(fmt::format("warning: step {} loss is {}", step_, loss));
      interval_loss_ += loss, interval_seconds_ += dt, ++interval_steps_;
      interval_tokens_ += tokens_per_step;
      if (a_.torch_empty_cache_steps > 0 && step_ % a_.torch_empty_cache_steps == 0)
        alloc_.empty_cache();

      bool logging = step_ % a_.logging_steps == 0 || step_ == total_;
      MemoryStats st = alloc_.stats();
      StepInfo info;
      info.step = step_;
      info.total = total_;
      info.loss = loss;
      info.learning_rate = schedule_->lr_at(step_ - 1);
      info.tokens_per_second = double(tokens_per_step) / std::max(dt, 1e-9);
      info.memory_allocated = st.allocated_bytes[kAllPools].current;
      info.memory_peak = st.allocated_bytes[kAllPools].peak;
      double per_step = seconds_since(run_start_) / double(step_ - run_start_step_);
      info.seconds_left = per_step * double(total_ - step_);
      if (logging) {
        log_step(interval_loss_ / double(interval_steps_), grad_norm_);
        info.tokens_per_second = interval_tokens_ / std::max(interval_seconds_, 1e-9);
        interval_loss_ = interval_seconds_ = 0;
        interval_steps_ = interval_tokens_ = 0;
      }
      progress_.step(info, logging);
      if (step_ % eval_every == 0 || step_ == total_) {
        auto [eval_loss, tokens] = evaluate();
        metrics_->append(json{
            {"step", step_}, {"eval_loss", eval_loss}, {"eval_perplexity", std::exp(eval_loss)}});
        progress_.message(
            fmt::format("step {}: validation loss {:.4f}, perplexity {:.2f} ({} tokens)", step_,
                        eval_loss, std::exp(eval_loss), tokens));
        write_file_atomic((dir_ / "loss_curve.svg").string(),
                          loss_curve_svg(metrics_->history(),
                                         fmt::format("{} on {}", a_.model,
                                                     fs::path(a_.data).filename().string())));
      }
      if (a_.save_steps > 0 && step_ % a_.save_steps == 0) save();
    }
    save();
  } catch (const OutOfMemory& e) {
    return out_of_memory(e, fmt::format("in step {} of {}", step_ + 1, total_));
  }
  write_memory_record();
  progress_.finish();
  MemoryStats st = alloc_.stats();
  out_ << fmt::format("done: {} steps in {:.1f} s; peak memory {} allocated, {} reserved\n", step_,
                      seconds_since(run_start_), format_bytes(st.allocated_bytes[kAllPools].peak),
                      format_bytes(st.reserved_bytes[kAllPools].peak));
  out_ << fmt::format(
      "wrote {} (checkpoints, metrics.jsonl, loss_curve.svg, memory.json, "
      "memory_trace.json, peak_report.txt, memory_summary.txt)\n",
      a_.output_dir);
  return 0;
}

}  // namespace

int run_train(const TrainArgs& args, std::ostream& out, std::ostream& err) {
  Trainer trainer(args, out, err);
  return trainer.run();
}

}  // namespace fitgrad::apps
