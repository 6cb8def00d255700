// `fitgrad export --merge` (see export.h).
#include "apps/export.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>

#include "apps/export_parts.h"
#include "apps/output_policy.h"
#include "data/gguf_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "io/gguf.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "io/whole_file.h"
#include "nn/config.h"
#include "nn/gguf_model.h"
#include "nn/lora_adapter.h"
#include "nn/target_modules.h"
#include "nn/text_config.h"
#include "tensor/error.h"
#include "tensor/memory/bytes.h"
#include "tensor/ops/elementwise.h"
#include "tensor/ops/matmul.h"
#include "train/checkpoint_dir.h"
#include "train/model_source.h"

namespace fitgrad::apps {

using train::folder_weights;
using train::kSkipVerificationFlag;
using train::kSkipVerificationHelp;
using train::load_tokenizer_spec;
using train::read_weights_file;
using train::TokenizerSpec;
using train::verify_before_reading;
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

int64_t export_file(const ExportArgs& a, std::ostream& out) {
  const DType dtype = parse_dtype(a.dtype);
  FG_CHECK(!a.merge.empty(),
           "[export] -o {}: one .safetensors file is written for a merge (give --merge); for a "
           "Hugging Face model folder, give -o a directory",
           a.out);
  std::string base_file;
  const nn::TensorSource source = base_weights(a, &base_file);
  OutputPolicy outputs("export", a.overwrite);  // Note [Output policy]
  declare_inputs(a, base_file, outputs);
  const size_t output = outputs.output("-o", a.out);
  const Exported ex = exported_weights(a, source, dtype);
  io::write_safetensors(outputs.file(output), outputs.where(output), ex.tensors,
                        {{"format", "pt"}});
  outputs.commit(out);
  out << fmt::format("{}; wrote {} tensors in {} to {}\n", ex.what, ex.tensors.size(), a.dtype,
                     a.out);
  return ex.merged;
}

// Note [Model folders written]
// -o DIR writes what transformers' save_pretrained writes and from_pretrained, vLLM and
// fitgrad read (Note [Sharded model folders] in model_source.cpp):
//   - the weights as model.safetensors, or, past --max_shard_size, as
//     model-0000k-of-0000n.safetensors with model.safetensors.index.json ({"metadata":
//     {"total_size"}, "weight_map"}), split as transformers splits them: tensors in order, a
//     new shard when the next one would pass the size (a tensor larger than it is a shard
//     alone);
//   - config.json: the base folder's own, every key kept, torch_dtype set to the output's (a
//     multimodal base's text model's: Note [Multimodal folders] in nn/text_config.cpp); for a
//     GGUF base, the config its metadata gives (config_to_json);
//   - generation_config.json: the base folder's, else the tokenizer's bos and eos ids;
//   - the tokenizer: the base folder's tokenizer.json, tokenizer_config.json,
//     special_tokens_map.json and chat_template.jinja as they are; for a GGUF base or a
//     checkpoint that stores its vocabulary, a tokenizer.json and tokenizer_config.json written
//     from it (data/hf_tokenizer.h). GPT-2's and the byte tokenizer are not written (the line
//     says so).
// Every file goes through the output policy (Note [Output policy]): DIR is created when
// missing, and a file already there is replaced only with --overwrite.
struct FolderFile {
  std::string name;
  std::string text;  // the contents of a non-weight file
};

// --max_shard_size through the project's byte-size reader (tensor/memory/bytes.h), its errors
// named by the flag.
int64_t max_shard_bytes(const std::string& s) {
  uint64_t bytes = 0;
  try {
    bytes = parse_bytes(s);
  } catch (const Error&) {
    bytes = 0;
  }
  FG_CHECK(bytes > 0, "[export] --max_shard_size must be a size like 5GB, 500MB or 2GiB, got '{}'",
           s);
  return int64_t(bytes);
}

const char* torch_dtype_name(DType d) {
  return d == DType::bf16 ? "bfloat16" : d == DType::f16 ? "float16" : "float32";
}

// config.json, generation_config.json and the tokenizer files of the folder (Note [Model
// folders written]); `notes` collects what was left out.
std::vector<FolderFile> folder_files(const ExportArgs& a, DType dtype, std::string* notes) {
  std::vector<FolderFile> files;
  const auto add_json = [&](const std::string& name, const nlohmann::json& j) {
    files.push_back({name, io::json_text(j, 2) + "\n"});
  };
  nlohmann::json vocabulary;  // a vocabulary to write a tokenizer.json from, if any
  if (fs::is_directory(a.base)) {
    const fs::path dir(a.base);
    FG_CHECK(fs::is_regular_file(dir / "config.json"), "[export] --base {} has no config.json",
             a.base);
    nlohmann::json config = io::read_json_file((dir / "config.json").string(),
                                               "[export] --base " + a.base + ": config.json");
    if (nn::is_multimodal_config(config)) {  // Note [Multimodal folders] in nn/text_config.cpp
      config = nn::text_model_config(config, (dir / "config.json").string());
      *notes +=
          "; the folder is the base's text model (Gemma3ForCausalLM), without its vision "
          "tower";
    }
    config["torch_dtype"] = torch_dtype_name(dtype);
    add_json("config.json", config);
    if (fs::is_regular_file(dir / "generation_config.json"))
      files.push_back(
          {"generation_config.json",
           io::read_whole_file("export", "file", (dir / "generation_config.json").string())});
    if (fs::is_regular_file(dir / "tokenizer.json")) {
      for (const char* name : {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                               "chat_template.jinja"})
        if (fs::is_regular_file(dir / name))
          files.push_back({name, io::read_whole_file("export", "file", (dir / name).string())});
    } else if (fs::is_regular_file(dir / "fitgrad_tokenizer.json")) {
      const TokenizerSpec spec = load_tokenizer_spec(a.base);
      vocabulary = spec.vocabulary;
      if (vocabulary.is_null())
        *notes += fmt::format("; its tokenizer ({}) is not written as a tokenizer.json", spec.id);
    }
  } else if (a.base.ends_with(".gguf")) {
    const io::GgufFile file = io::GgufFile::open(a.base);
    nlohmann::json config = nn::config_to_json(nn::config_from_gguf(file));
    config["torch_dtype"] = torch_dtype_name(dtype);
    add_json("config.json", config);
    vocabulary = data::gguf_vocabulary(file);
  } else {
    const fs::path beside = fs::path(a.base).parent_path() / "config.json";
    FG_CHECK(fs::is_regular_file(beside),
             "[export] --base {}: a model folder needs its config.json, and there is none beside "
             "the file ({}); give --base the folder",
             a.base, beside.string());
    nlohmann::json config = io::read_json_file(beside.string(), "[export] " + beside.string());
    config["torch_dtype"] = torch_dtype_name(dtype);
    add_json("config.json", config);
  }
  if (!vocabulary.is_null()) {
    add_json("tokenizer.json", data::hf_tokenizer_json(vocabulary));
    add_json("tokenizer_config.json", data::hf_tokenizer_config(vocabulary));
    const bool has_generation_config =
        std::any_of(files.begin(), files.end(),
                    [](const FolderFile& f) { return f.name == "generation_config.json"; });
    nlohmann::json generation = nlohmann::json::object();
    for (const char* role : {"bos", "eos"})
      if (vocabulary.contains(role) && !vocabulary.at(role).is_null())
        generation[std::string(role) + "_token_id"] = vocabulary.at(role);
    if (!has_generation_config && !generation.empty())
      add_json("generation_config.json", generation);
  }
  return files;
}

// Note [An export replaces an export]
// A folder's weights are model.safetensors, or shards model-<k>-of-<n>.safetensors with
// model.safetensors.index.json, and a loader that follows the index (vLLM, transformers when
// there is no model.safetensors) reads whatever shards it names. So an export into a folder
// holding an earlier export's weight files of other names (3 shards then, 1 file or 2 shards
// now) removes them with --overwrite, after the new files are in place, and without it is
// refused naming them (apps/output_policy.h, stale()). Only files of those names are the
// export's; whatever else the folder holds (a README, the user's notes) stays.

// The weight files in `dir` of an earlier export that this one, of `n` shards named by
// `shard_name`, does not write.
std::vector<std::string> earlier_weight_files(
    const std::string& dir, size_t n, const std::function<std::string(size_t)>& shard_name) {
  std::set<std::string> now;
  for (size_t k = 0; k < n; ++k) now.insert(shard_name(k));
  if (n > 1) now.insert("model.safetensors.index.json");
  static const std::regex weights(R"(model(-\d{5}-of-\d{5})?\.safetensors(\.index\.json)?)");
  std::vector<std::string> earlier;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (std::regex_match(name, weights) && !now.count(name)) earlier.push_back(name);
  }
  std::sort(earlier.begin(), earlier.end());
  return earlier;
}

int64_t export_folder(const ExportArgs& a, std::ostream& out) {
  const DType dtype = parse_dtype(a.dtype);
  const int64_t max_shard = max_shard_bytes(a.max_shard_size);
  std::string base_file, notes;
  const nn::TensorSource source = base_weights(a, &base_file);
  const std::vector<FolderFile> files = folder_files(a, dtype, &notes);
  // The shards: entries in order, a new one when the next would pass max_shard.
  std::vector<std::vector<size_t>> shards;
  int64_t shard_bytes = 0, total = 0;
  for (size_t k = 0; k < source.entries.size(); ++k) {
    const nn::TensorSource::Entry& e = source.entries[k];
    const int64_t bytes =
        numel(e.shape) * int64_t(element_size(is_floating(e.dtype) ? dtype : e.dtype));
    if (shards.empty() || (shard_bytes + bytes > max_shard && !shards.back().empty())) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(k);
    shard_bytes += bytes;
    total += bytes;
  }
  const size_t n = shards.size();
  const auto shard_name = [&](size_t k) {
    return n == 1 ? std::string("model.safetensors")
                  : fmt::format("model-{:05d}-of-{:05d}.safetensors", k + 1, n);
  };
  OutputPolicy outputs("export", a.overwrite);  // Note [Output policy]
  declare_inputs(a, base_file, outputs);
  outputs.directory("-o", a.out);
  const auto declare = [&](const std::string& name) {
    return outputs.output("-o", (fs::path(a.out) / name).string());
  };
  std::vector<size_t> shard_outputs;
  for (size_t k = 0; k < n; ++k) shard_outputs.push_back(declare(shard_name(k)));
  constexpr size_t kNone = ~size_t(0);
  const size_t index_output = n > 1 ? declare("model.safetensors.index.json") : kNone;
  // Note [An export replaces an export]
  for (const std::string& name : earlier_weight_files(a.out, n, shard_name))
    outputs.stale("-o", (fs::path(a.out) / name).string());
  std::vector<size_t> file_outputs;
  for (const FolderFile& f : files) file_outputs.push_back(declare(f.name));

  const Exported ex = exported_weights(a, source, dtype);
  nlohmann::json weight_map = nlohmann::json::object();
  for (size_t k = 0; k < n; ++k) {
    std::vector<std::pair<std::string, Tensor>> tensors;
    for (size_t e : shards[k]) {
      tensors.push_back(ex.tensors[e]);
      weight_map[ex.tensors[e].first] = shard_name(k);
    }
    io::write_safetensors(outputs.file(shard_outputs[k]), outputs.where(shard_outputs[k]), tensors,
                          {{"format", "pt"}});
  }
  if (index_output != kNone)
    outputs.text(index_output, io::json_text(nlohmann::json{{"metadata", {{"total_size", total}}},
                                                            {"weight_map", weight_map}},
                                             2) +
                                   "\n");
  for (size_t k = 0; k < files.size(); ++k) outputs.text(file_outputs[k], files[k].text);
  outputs.commit(out);
  std::string written;
  for (const FolderFile& f : files) written += ", " + f.name;
  out << fmt::format("{}; wrote the Hugging Face model folder {}: {} tensors in {} in {} {}{}{}\n",
                     ex.what, a.out, ex.tensors.size(), a.dtype, n, n == 1 ? "file" : "shards",
                     written, notes);
  return ex.merged;
}

}  // namespace

// The weights an export writes: the base's, with the adapter merged in when --merge names
// one, every floating tensor in `dtype`. Note [Streaming loads]: the base is read one tensor
// at a time, so the command holds the output in `dtype` plus one f32 tensor.
Exported exported_weights(const ExportArgs& a, const nn::TensorSource& source, DType dtype) {
  Exported ex;
  std::map<std::string, const nn::TensorSource::Entry*> entries;
  for (const nn::TensorSource::Entry& e : source.entries) entries[e.name] = &e;
  // The adapted weights: every lora_A with its lora_B, over an existing base weight.
  std::map<std::string, std::pair<Tensor, Tensor>> pairs;  // "<path>.weight" -> (A, B)
  std::map<std::string, bool> transposed;  // adapted weight -> stored (in, out), GPT-2's Conv1D
  double scaling = 1;
  if (!a.merge.empty()) {
    const nn::AdapterConfig config = nn::read_adapter_config(a.merge);
    const auto adapter =
        io::SafetensorsFile::open((fs::path(a.merge) / "adapter_model.safetensors").string())
            .tensors();
    for (const auto& [key, t] : adapter) {
      FG_CHECK(key.starts_with(kPrefix) &&
                   (key.ends_with(".lora_A.weight") || key.ends_with(".lora_B.weight")),
               "[export] {}: '{}' is not a LoRA factor (PEFT names them {}<path>.lora_A.weight)",
               a.merge, key, kPrefix);
      const std::string path =
          key.substr(std::string(kPrefix).size(), key.size() - std::string(kPrefix).size() -
                                                      std::string(".lora_A.weight").size());
      auto& [A, B] = pairs[path + ".weight"];
      (key.ends_with(".lora_A.weight") ? A : B) = t;
    }
    const std::vector<std::string> ranks = nn::rank_problems(config, adapter);
    FG_CHECK(ranks.empty(), "[export] --merge {}: {}", a.merge, fmt::join(ranks, "; "));
    scaling = config.lora.scaling();
    for (const auto& [name, ab] : pairs) {  // everything checked before anything is read
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
               "[export] '{}' is {}, the adapter's B A is {}", name, shape_str(w),
               shape_str(delta));
      transposed[name] = !torch;
    }
    check_targets(a, config, source, pairs);  // Note [Adapters export merges]
    ex.what = fmt::format("merged {} LoRA weights (r {}, lora_alpha {}, scaling {}) into {}",
                          pairs.size(), config.lora.r, config.lora.alpha, scaling, a.base);
  } else {
    ex.what = "converted " + a.base;
  }
  for (const nn::TensorSource::Entry& e : source.entries) {
    Tensor t = source.read(e.name);
    if (const auto it = pairs.find(e.name); it != pairs.end()) {
      const auto& [A, B] = it->second;
      const Tensor delta = ops::scale(ops::matmul(B.to(DType::f32), A.to(DType::f32)), scaling);
      t = ops::add(t.to(DType::f32),
                   transposed.at(e.name) ? delta.transpose(0, 1).contiguous() : delta);
    }
    ex.tensors.emplace_back(e.name, is_floating(t.dtype()) ? t.to(dtype).contiguous() : t);
  }
  ex.merged = int64_t(pairs.size());
  return ex;
}

nn::TensorSource base_weights(const ExportArgs& a, std::string* file) {
  *file = a.base;
  if (fs::is_directory(a.base)) return folder_weights(a.base, file);
  return read_weights_file(a.base, DType::f32, "--base");
}

void declare_inputs(const ExportArgs& a, const std::string& base_file, OutputPolicy& outputs) {
  outputs.input("--base", a.base);
  outputs.input("--base", base_file);
  if (a.merge.empty()) return;
  outputs.input("--merge", a.merge);
  outputs.input("--merge", (fs::path(a.merge) / "adapter_config.json").string());
  outputs.input("--merge", (fs::path(a.merge) / "adapter_model.safetensors").string());
}

int64_t export_merged(const ExportArgs& a, std::ostream& out) {
  std::error_code ec;
  FG_CHECK(a.out.ends_with(".safetensors") || a.out.ends_with(".gguf") || !fs::exists(a.out, ec) ||
               fs::is_directory(a.out, ec),
           "[export] -o {} is an existing file, and a path without the extension .gguf (a GGUF "
           "file) or .safetensors (a merge) is a Hugging Face model folder, a directory: give "
           "a folder's path, or a path ending in .gguf or .safetensors",
           a.out);
  verify_before_reading(a.base, "export --base", a.skip_verification);
  if (!a.merge.empty()) verify_before_reading(a.merge, "export --merge", a.skip_verification);
  if (a.out.ends_with(".safetensors")) return export_file(a, out);
  if (a.out.ends_with(".gguf")) return export_gguf(a, out);
  return export_folder(a, out);
}

CLI::App* add_export_command(CLI::App& app, ExportArgs& a) {
  CLI::App* cmd = app.add_subcommand(
      "export",
      "Write a Hugging Face model folder or a GGUF file (optionally with a PEFT LoRA adapter "
      "merged in), or a merge as one safetensors file");
  cmd->add_option("--merge", a.merge,
                  "a PEFT adapter directory (adapter_config.json, adapter_model.safetensors) to "
                  "merge into the base");
  cmd->add_option("--base", a.base,
                  "the base model: a checkpoint directory or model folder, a .gguf or a "
                  ".safetensors file")
      ->required();
  cmd->add_option("-o,--output", a.out,
                  "a directory for a Hugging Face model folder, a .gguf file, or a .safetensors "
                  "file (a merge)")
      ->required();
  cmd->add_option("--dtype", a.dtype, "bf16, f16 or f32; for a .gguf also q8_0")
      ->capture_default_str();
  cmd->add_option("--max_shard_size", a.max_shard_size,
                  "the largest shard of a model folder (5GB, 500MB, 2GiB, ...)")
      ->capture_default_str();
  cmd->add_flag("--overwrite", a.overwrite, "replace an existing -o file");
  cmd->add_flag(kSkipVerificationFlag, a.skip_verification, kSkipVerificationHelp);
  cmd->footer(
      "The output is never an input (the adapter's files, the base), never inside a training "
      "run's directory or a checkpoint and never a special file; an existing file is replaced "
      "only with --overwrite, a write-protected or hard-linked one never (docs/run_promises.md).");
  return cmd;
}

}  // namespace fitgrad::apps
