// `fitgrad export --merge` (see export.h).
#include "apps/export.h"

#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <set>

#include "apps/model_source.h"
#include "io/safetensors.h"
#include "nn/lora_adapter.h"
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

}  // namespace

int64_t export_merged(const ExportArgs& a, std::ostream& out) {
  const DType dtype = parse_dtype(a.dtype);
  FG_CHECK(a.out.ends_with(".safetensors"), "[export] -o {}: the output must end in .safetensors",
           a.out);
  const nn::AdapterConfig config = nn::read_adapter_config(a.merge);
  const auto adapter =
      io::SafetensorsFile::open((fs::path(a.merge) / "adapter_model.safetensors").string())
          .tensors();
  const std::string base_file =
      fs::is_directory(a.base) ? (fs::path(a.base) / "model.safetensors").string() : a.base;
  std::map<std::string, Tensor> state =
      read_weights_file(base_file, DType::f32, "--base").read_all();
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
  for (const auto& [name, ab] : pairs) {
    const auto& [A, B] = ab;
    FG_CHECK(A.defined() && B.defined(), "[export] {}: '{}' has a lora_{} without its lora_{}",
             a.merge, name, A.defined() ? "A" : "B", A.defined() ? "B" : "A");
    const auto it = state.find(name);
    FG_CHECK(it != state.end(), "[export] {}: the adapter adapts '{}', which the base {} lacks",
             a.merge, name, a.base);
    const Tensor delta = ops::scale(ops::matmul(B.to(DType::f32), A.to(DType::f32)), scaling);
    const Tensor& w = it->second;  // (out, in), or GPT-2's Conv1D (in, out)
    const bool torch = w.shape() == delta.shape();
    FG_CHECK(torch || (w.dim() == 2 && w.size(0) == delta.size(1) && w.size(1) == delta.size(0)),
             "[export] '{}' is {}, the adapter's B A is {}", name, shape_str(w.shape()),
             shape_str(delta.shape()));
    it->second = ops::add(w.to(DType::f32), torch ? delta : delta.transpose(0, 1).contiguous());
  }
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : state)
    tensors.emplace_back(name, is_floating(t.dtype()) ? t.to(dtype).contiguous() : t);
  io::save_safetensors(a.out, tensors, {{"format", "pt"}});
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
  return cmd;
}

}  // namespace fitgrad::apps
