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
  // Note [Streaming loads]: the base is read one tensor at a time, so the command holds the
  // output in --dtype plus one f32 tensor, never the base in f32.
  const nn::TensorSource source = read_weights_file(base_file, DType::f32, "--base");
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
