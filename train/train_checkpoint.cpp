// A run's checkpoints: saving one atomically (checkpoint_dir.h), resuming from one with the
// checks of Note [Bitwise resume] (trainer.h), and trainer_state.json.
#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <vector>

#include "dist/device_errors.h"
#include "io/json_depth.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "nn/config.h"
#include "nn/lora_adapter.h"
#include "tensor/backend/profile.h"
#include "tensor/error.h"
#include "tensor/memory/scope.h"
#include "tensor/random/generator.h"
#include "train/checkpoint_dir.h"
#include "train/train_flags.h"
#include "train/train_run.h"

namespace fitgrad::train {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(fmt::format("[train {}] cannot read", p.string()));
  return std::string(std::istreambuf_iterator<char>(in), {});
}

json read_json(const fs::path& p) {
  try {
    return io::parse_json<json>(read_text(p), fmt::format("[train {}]", p.string()));
  } catch (const json::exception& e) {
    throw Error(fmt::format("[train {}] not valid JSON: {}", p.string(), e.what()));
  }
}

// A count in trainer_state.json: an integer in [0, 2^63), else an error naming the file.
int64_t count_field(const json& j, const char* key, const fs::path& file) {
  const json& v = j.at(key);
  if (!v.is_number_integer() || v.get<int64_t>() < 0)  // 2^63 and above read as negative
    throw Error(fmt::format("[train {}] '{}' must be a non-negative integer, got {}", file.string(),
                            key, v.dump()));
  return v.get<int64_t>();
}

}  // namespace

void resume_run(TrainRun& r, const std::string& dir) {
  const TrainArgs& a = r.a;
  fs::path d(dir);
  json state = read_json(d / "trainer_state.json");
  try {
    const json& args = state.at("args");
    // A data-parallel run keeps the global batch, whatever the world size (Note [ZeRO by
    // whole parameters] in dist/zero.h): the loader's position counts global batches.
    const int64_t world = r.group ? r.group->size() : 1;
    const int64_t then_world = args.value("world_size", int64_t(1));
    const int64_t then_batch = args.at("per_device_train_batch_size").get<int64_t>();
    if (then_batch * then_world != a.per_device_train_batch_size * world)
      throw Error(fmt::format(
          "[train] --resume_from_checkpoint {}: the global batch was {} there ({} rank(s) x "
          "--per_device_train_batch_size {}) and is {} now ({} x {}); a resume keeps it (Note "
          "[Bitwise resume])",
          dir, then_batch * then_world, then_world, then_batch,
          a.per_device_train_batch_size * world, world, a.per_device_train_batch_size));
    check_resume_keeps(args, a, dir);  // Note [One flag table]
    const std::string optimizer = state.value("optimizer", r.optimizer->name());
    if (optimizer != r.optimizer->name())
      throw Error(fmt::format(
          "[train] --resume_from_checkpoint {}: the optimizer was {} there and is {} now; its "
          "state cannot carry over",
          dir, optimizer, r.optimizer->name()));
    if (state.at("tokenizer").get<std::string>() != r.lm.tokenizer_id)
      throw Error(fmt::format("[train] --resume_from_checkpoint {}: tokenizer {} there, {} now",
                              dir, state.at("tokenizer").get<std::string>(), r.lm.tokenizer_id));
    r.step = count_field(state, "global_step", d / "trainer_state.json");
    count_field(state.at("rng"), "seed", d / "trainer_state.json");
    count_field(state.at("rng"), "offset", d / "trainer_state.json");
    if (r.loader) {  // a GRPO run has none (Note [GRPO runs] in train_grpo.cpp)
      data::LoaderState ls;
      from_json(state.at("loader"), ls);
      r.loader->restore(ls);
    }
    default_generator().set_state(
        {state.at("rng").at("seed").get<uint64_t>(), state.at("rng").at("offset").get<uint64_t>()});
    r.resumed_history = state.at("log_history").get<std::vector<json>>();
    if (state.contains("skipped_steps"))
      r.skipped_steps = count_field(state, "skipped_steps", d / "trainer_state.json");
    if (r.scaler) {
      const json& sc = state.at("scaler");
      r.scaler->load_state_dict(
          {{"scale", Tensor::full({}, sc.at("scale").get<double>(), DType::f32)},
           {"growth_tracker",
            Tensor::full({}, double(count_field(sc, "growth_tracker", d / "trainer_state.json")),
                         DType::i64)}});
    }
  } catch (const json::exception& e) {
    throw Error(fmt::format("[train {}] malformed trainer_state.json: {}",
                            (d / "trainer_state.json").string(), e.what()));
  }
  if (r.lora) {  // Note [LoRA runs]: the base comes from --model and --init
    nn::load_lora_adapter(*r.lm.model, dir);
  } else {
    auto weights = io::SafetensorsFile::open((d / "model.safetensors").string());
    try {
      r.lm.model->load(weights.tensors(), /*strict=*/true);
    } catch (const Error& e) {
      throw Error(fmt::format(
          "[train] --resume_from_checkpoint {}: its model.safetensors does not fit --model {}: {}",
          dir, a.model, e.what()));
    }
  }
  {
    auto opt = io::SafetensorsFile::open((d / "optimizer.safetensors").string());
    // Note [ZeRO by whole parameters]: a rank keeps its own parameters' state.
    r.optimizer->load_state_dict(r.zero ? r.zero->local(opt.tensors()) : opt.tensors());
  }
  if (r.optimizer->steps() + r.skipped_steps != r.step)
    throw Error(fmt::format(
        "[train {}] the optimizer took {} steps and {} were skipped, trainer_state.json says "
        "global_step {}: the files are of different checkpoints",
        (d / "optimizer.safetensors").string(), r.optimizer->steps(), r.skipped_steps, r.step));
  if (r.step >= r.total)
    throw Error(fmt::format(
        "[train] --resume_from_checkpoint {} is at step {}, and this run has {} steps: nothing "
        "to do (raise --max_steps or --num_train_epochs)",
        dir, r.step, r.total));
  r.last_saved = r.step;
  r.run_start_step = r.step;
  r.out << fmt::format("resumed from {} at step {}\n", dir, r.step);
}

json trainer_state_json(const TrainRun& r) {
  const TrainArgs& a = r.a;
  RngState rng = default_generator().state();
  json state{
      {"global_step", r.step},
      {"total_steps", r.total},
      {"epoch", r.epoch_at(r.step)},
      {"rng", {{"seed", rng.seed}, {"offset", rng.offset}}},
      {"tokenizer", r.lm.tokenizer_id},
      {"optimizer", r.optimizer->name()},
      {"args", run_arguments(a, r.group ? r.group->size() : 1)},
      {"log_history", r.metrics->history()},
      {"skipped_steps", r.skipped_steps},
  };
  if (r.loader) to_json(state["loader"], r.loader->state());
  if (r.scaler)  // Note [Dynamic loss scaling]: the scale is an f32, exact in JSON's double
    state["scaler"] = {{"scale", double(r.scaler->scale())},
                       {"growth_tracker", r.scaler->growth_tracker()}};
  return state;
}

namespace {

// Note [A dry run's saves]
// A save makes host tensors of its own: the optimizer state's step counts and seeds, i64
// scalars (optim::Optimizer::state_dict), held until the files are written. On a cpu run they
// are allocations of the run's own ledger ("checkpoint", under other), so a dry run that plans
// a cpu allocates tensors of their shapes on meta at each save, in the same context, and frees
// them as the save does: its trace stays the run's to the last event, the blocks' offsets
// included. The order the two make them in differs (state_dict's, the keys'), but they are
// all one size, so the k-th takes the same block in both; both then free them in the order of
// their addresses (release_by_address), not in a container's order. Planning a card, they are
// the host's and there is nothing to replay. A dry run writes no file.
void release_by_address(std::vector<Tensor> held) {
  std::sort(held.begin(), held.end(), [](const Tensor& a, const Tensor& b) {
    return std::less<const void*>()(a.storage()->data(), b.storage()->data());
  });
  for (Tensor& t : held) t = Tensor();
}

void plan_save(TrainRun& r) {
  r.last_saved = r.step;
  if (r.zero || !r.writes_outputs() || backend::profile_for(r.device).backend != DeviceType::cpu)
    return;
  const MemoryContextScope scope({Category::other, intern_label("checkpoint")});
  std::vector<Tensor> held;
  for (const auto& [name, t] : r.optimizer->state_dict())
    if (t.device().type == DeviceType::cpu)  // made by state_dict; the state itself is on meta
      held.push_back(Tensor::empty(t.shape(), t.dtype(), r.device));
  release_by_address(std::move(held));
}

}  // namespace

void save_checkpoint(TrainRun& r) {
  if (r.a.save_strategy == "no" || r.last_saved == r.step) return;
  // Note [Device error flags] in cuda/error_flags.h: a checkpoint never holds updates from
  // batches whose out-of-range ids a kernel left out. A --save_steps step that is not a
  // logging step, and the checkpoint of a signal, read the records here (issue 46); a
  // recorded id ends the run with its error and the last checkpoint stays the newest, on every
  // rank of a job (Note [Device errors over the ranks] in dist/device_errors.h), whose plan
  // makes the same collective.
  dist::check_device_errors_over_ranks(r.group.get(), r.device);
  if (r.dry_run) {
    plan_save(r);
    return;
  }
  const MemoryContextScope scope({Category::other, intern_label("checkpoint")});
  // Note [ZeRO by whole parameters]: every rank sends its share to rank 0, which writes one
  // process's file.
  std::map<std::string, Tensor> state =
      r.zero ? r.zero->consolidated_state_dict() : std::map<std::string, Tensor>{};
  if (!r.writes_outputs()) {  // Note [Data-parallel runs]: rank 0 writes the checkpoint
    r.last_saved = r.step;
    return;
  }
  const nn::CausalLM& model = *r.lm.model;
  std::string path = commit_checkpoint(r.a.output_dir, r.step, [&](const std::string& dir) {
    fs::path d(dir);
    if (r.lora)  // Note [LoRA runs]: the adapter, not the base
      nn::save_lora_adapter(model, dir, {*r.lora, r.a.lora_target, r.a.model});
    else
      io::save_safetensors((d / "model.safetensors").string(), model.named_parameters(),
                           {{"format", "pt"}});
    write_file_atomic((d / "config.json").string(),
                      io::json_text(nn::config_to_json(model.config()), 2) + "\n");
    save_tokenizer_spec(dir, r.lm.tokenizer_id, r.lm.tokenizer_vocabulary);
    if (!r.zero) state = r.optimizer->state_dict();
    io::save_safetensors((d / "optimizer.safetensors").string(),
                         std::vector<std::pair<std::string, Tensor>>(state.begin(), state.end()));
    write_file_atomic((d / "trainer_state.json").string(),
                      io::json_text(trainer_state_json(r), 1) + "\n");
  });
  std::vector<Tensor> made;  // Note [A dry run's saves]: state_dict's scalars, and shared state
  for (auto& [name, t] : state) made.push_back(std::move(t));
  release_by_address(std::move(made));
  r.last_saved = r.step;
  r.progress.message(fmt::format("saved {}", path));
  for (const std::string& problem : prune_checkpoints(r.a.output_dir, r.a.save_total_limit))
    r.progress.message("warning: " + problem);
}

}  // namespace fitgrad::train
