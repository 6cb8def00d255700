// `fitgrad export --merge` (see export.h).
#include "apps/export.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "apps/model_source.h"
#include "apps/output_policy.h"
#include "io/safetensors.h"
#include "nn/lora_adapter.h"
#include "nn/target_modules.h"
#include "tensor/error.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"

namespace fitgrad::apps {
namespace fs = std::filesystem;

namespace {

DType parse_dtype(const std::string& s) {
  if (s == "bf16") return DType::bf16;
  if (s == "f16") return DType::f16;
  if (s == "f32") return DType::f32;
  throw Error(fmt::format("[export] --dtype must be bf16, f16 or f32, got '{}'", s));
}

constexpr const char* kPrefix = "base_model.model.";

// The adapter's target_modules as PEFT reads them: a list of names, "all-linear", or a
// single string that is a regular expression (nn/lora_adapter.cpp writes a pattern as one).
nn::TargetModules adapter_targets(const std::string& described) {
  if (described != "all-linear" && described.find_first_of("^$*+?()[]{}|\\") != std::string::npos)
    return nn::TargetModules::regex(described);
  return nn::TargetModules::parse(described);
}

// Note [Adapters export merges]
// A merge is written only when it is what PEFT would run: read_adapter_config refuses r <= 0,
// a scaling (lora_alpha / r) that is not finite and positive, DoRA and per-module ranks or
// alphas; here every target_modules entry must name a linear weight of the base (PEFT's
// "Target modules ... not found"), every adapted layer must be one of the targets, and the
// adapter must hold at least one pair of factors. Each refusal names the adapter and the key.
void check_targets(const ExportArgs& a, const nn::AdapterConfig& config,
                   const nn::TensorSource& base,
                   const std::map<std::string, std::pair<Tensor, Tensor>>& pairs) {
  FG_CHECK(!pairs.empty(), "[export] --merge {}: the adapter holds no LoRA factor", a.merge);
  nn::TargetModules targets = adapter_targets(config.target_modules);
  for (const nn::TensorSource::Entry& e : base.entries)
    if (e.shape.size() == 2 && e.name.ends_with(".weight"))
      targets.matches(e.name.substr(0, e.name.size() - std::string(".weight").size()));
  try {
    nn::check_targets_found(targets);
  } catch (const Error& e) {
    throw Error(
        fmt::format("[export] --merge {}: adapter_config.json's target_modules do not "
                    "fit the base {}: {}",
                    a.merge, a.base, e.what()));
  }
  for (const auto& [name, ab] : pairs) {
    const std::string path = name.substr(0, name.size() - std::string(".weight").size());
    FG_CHECK(targets.matches(path),
             "[export] --merge {}: the adapter holds factors for '{}', which its target_modules "
             "({}) do not name",
             a.merge, path, config.target_modules);
  }
}

}  // namespace

int64_t export_merged(const ExportArgs& a, std::ostream& out) {
  const DType dtype = parse_dtype(a.dtype);
  FG_CHECK(a.out.ends_with(".safetensors"), "[export] -o {}: the output must end in .safetensors",
           a.out);
  const std::string adapter_file = (fs::path(a.merge) / "adapter_model.safetensors").string();
  // A base folder is model.safetensors or a sharded one (Note [Sharded model folders]).
  std::string base_file = a.base;
  const bool base_folder = fs::is_directory(a.base);
  std::optional<nn::TensorSource> folder;
  if (base_folder) folder = folder_weights(a.base, &base_file);
  OutputPolicy outputs("export", a.overwrite);  // Note [Output policy]
  outputs.input("--merge", a.merge);
  outputs.input("--merge", (fs::path(a.merge) / "adapter_config.json").string());
  outputs.input("--merge", adapter_file);
  outputs.input("--base", a.base);
  outputs.input("--base", base_file);
  const size_t output = outputs.output("-o", a.out);
  const nn::AdapterConfig config = nn::read_adapter_config(a.merge);
  const auto adapter = io::SafetensorsFile::open(adapter_file).tensors();
  // Note [Streaming loads]: the base is read one tensor at a time, so the command holds the
  // output in --dtype plus one f32 tensor, never the base in f32.
  const nn::TensorSource source =
      base_folder ? *folder : read_weights_file(base_file, DType::f32, "--base");
  std::map<std::string, const nn::TensorSource::Entry*> entries;
  for (const nn::TensorSource::Entry& e : source.entries) entries[e.name] = &e;
  // The adapted weights: every lora_A with its lora_B, over an existing base weight.
  std::map<std::string, std::pair<Tensor, Tensor>> pairs;  // "<path>.weight" -> (A, B)
  for (const auto& [key, t] : adapter) {
    FG_CHECK(key.starts_with(kPrefix) &&
                 (key.ends_with(".lora_A.weight") || key.ends_with(".lora_B.weight")),
             "[export] {}: '{}' is not a LoRA factor (PEFT names them {}<path>.lora_A.weight)",
             a.merge, key, kPrefix);
    const std::string path =
        key.substr(std::string(kPrefix).size(),
                   key.size() - std::string(kPrefix).size() - std::string(".lora_A.weight").size());
    auto& [A, B] = pairs[path + ".weight"];
    (key.ends_with(".lora_A.weight") ? A : B) = t;
  }
  const double scaling = config.lora.scaling();
  std::map<std::string, bool> transposed;  // adapted weight -> stored (in, out), GPT-2's Conv1D
  for (const auto& [name, ab] : pairs) {   // everything checked before anything is read
    const auto& [A, B] = ab;
    FG_CHECK(A.defined() && B.defined(), "[export] {}: '{}' has a lora_{} without its lora_{}",
             a.merge, name, A.defined() ? "A" : "B", A.defined() ? "B" : "A");
    const auto it = entries.find(name);
    FG_CHECK(it != entries.end(), "[export] {}: the adapter adapts '{}', which the base {} lacks",
             a.merge, name, a.base);
    const Shape& w = it->second->shape;  // (out, in), or GPT-2's Conv1D (in, out)
    const Shape delta{B.size(0), A.size(1)};
    const bool torch = w == delta;
    FG_CHECK(torch || (w.size() == 2 && w[0] == delta[1] && w[1] == delta[0]),
             "[export] '{}' is {}, the adapter's B A is {}", name, shape_str(w), shape_str(delta));
    transposed[name] = !torch;
  }
  check_targets(a, config, source, pairs);  // Note [Adapters export merges]
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const nn::TensorSource::Entry& e : source.entries) {
    Tensor t = source.read(e.name);
    if (const auto it = pairs.find(e.name); it != pairs.end()) {
      const auto& [A, B] = it->second;
      const Tensor delta = ops::scale(ops::matmul(B.to(DType::f32), A.to(DType::f32)), scaling);
      t = ops::add(t.to(DType::f32),
                   transposed.at(e.name) ? delta.transpose(0, 1).contiguous() : delta);
    }
    tensors.emplace_back(e.name, is_floating(t.dtype()) ? t.to(dtype).contiguous() : t);
  }
  io::write_safetensors(outputs.file(output), outputs.where(output), tensors, {{"format", "pt"}});
  outputs.commit(out);
  out << fmt::format(
      "merged {} LoRA weights (r {}, lora_alpha {}, scaling {}) into {}; wrote {} "
      "tensors in {} to {}\n",
      pairs.size(), config.lora.r, config.lora.alpha, scaling, a.base, tensors.size(), a.dtype,
      a.out);
  return int64_t(pairs.size());
}

CLI::App* add_export_command(CLI::App& app, ExportArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "export", "Merge a PEFT LoRA adapter into its base model and write one safetensors file");
  cmd->add_option("--merge", a.merge,
                  "the adapter directory (adapter_config.json, "
                  "adapter_model.safetensors)")
      ->required();
  cmd->add_option("--base", a.base, "the base model: .safetensors, .gguf or a checkpoint directory")
      ->required();
  cmd->add_option("-o,--output", a.out, "the output .safetensors file")->required();
  cmd->add_option("--dtype", a.dtype, "bf16, f16 or f32")->capture_default_str();
  cmd->add_flag("--overwrite", a.overwrite, "replace an existing -o file");
  cmd->footer(
      "The output is never an input (the adapter's files, the base), never inside a training "
      "run's directory or a checkpoint and never a special file; an existing file is replaced "
      "only with --overwrite, a write-protected or hard-linked one never (docs/run_promises.md).");
  return cmd;
}

}  // namespace fitgrad::apps
