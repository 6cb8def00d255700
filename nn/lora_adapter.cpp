// PEFT adapter files (see lora_adapter.h).
#include "nn/lora_adapter.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <type_traits>
#include <vector>

#include "autograd/grad_mode.h"
#include "io/atomic_file.h"
#include "io/json_depth.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "nn/target_modules.h"
#include "tensor/error.h"

namespace fitgrad::nn {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::vector<const LoraLinear*> lora_layers(const Module& model) {
  std::vector<const LoraLinear*> out;
  for (const auto& [path, m] : model.named_modules())
    if (const auto* l = dynamic_cast<const LoraLinear*>(m)) out.push_back(l);
  return out;
}

// PEFT's target_modules value: a list of names, or a string (a pattern, "all-linear").
json target_modules_json(const std::string& describe) {
  if (describe == "all-linear" || describe.find_first_of("^$*+?()[]{}|\\") != std::string::npos)
    return describe;
  json list = json::array();
  std::stringstream in(describe);
  for (std::string name; std::getline(in, name, ',');) list.push_back(name);
  return list;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  FG_CHECK(in.good(), "[adapter] cannot read {}", p.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string peft_key(const std::string& layer_path, const char* factor) {
  return "base_model.model." + layer_path + "." + factor + ".weight";
}

void save_lora_adapter(const Module& model, const std::string& dir, const AdapterConfig& config) {
  const auto layers = lora_layers(model);
  FG_CHECK(!layers.empty(), "[adapter] the model has no LoRA layer to save");
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const LoraLinear* l : layers) {
    tensors.emplace_back(peft_key(l->path(), "lora_A"), l->lora_A());
    tensors.emplace_back(peft_key(l->path(), "lora_B"), l->lora_B());
  }
  const json j = {
      {"peft_type", "LORA"},
      {"task_type", "CAUSAL_LM"},
      {"r", config.lora.r},
      {"lora_alpha", config.lora.alpha},
      {"lora_dropout", config.lora.dropout},
      {"use_rslora", config.lora.use_rslora},
      {"target_modules", target_modules_json(config.target_modules)},
      {"bias", "none"},
      {"base_model_name_or_path", config.base_model_name_or_path},
      {"fan_in_fan_out", false},
      {"inference_mode", true},
      {"init_lora_weights", true},
      {"modules_to_save", nullptr},
      {"layers_to_transform", nullptr},
      {"layers_pattern", nullptr},
      {"rank_pattern", json::object()},
      {"alpha_pattern", json::object()},
      {"use_dora", false},
      {"revision", nullptr},
  };
  fs::create_directories(dir);
  io::save_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), tensors,
                       {{"format", "pt"}});
  io::write_file_atomic((fs::path(dir) / "adapter_config.json").string(),
                        io::json_text(j, 2) + "\n", "[adapter]");
}

namespace {

// The value of `key` in adapter_config.json as T (`fallback` when absent or null); a
// missing key or one of another JSON type is an error naming the key, never nlohmann's
// "type must be number" alone.
template <class T>
T adapter_key(const json& j, const char* key, const fs::path& p,
              const std::optional<T>& fallback = std::nullopt) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    FG_CHECK(fallback.has_value(), "[adapter] {}: \"{}\" is missing", p.string(), key);
    return *fallback;
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw Error(fmt::format("[adapter] {}: \"{}\" is {} {}, not {}", p.string(), key,
                            it->type_name(), it->dump(),
                            std::is_same_v<T, bool>          ? "a boolean"
                            : std::is_arithmetic_v<T>        ? "a number"
                            : std::is_same_v<T, std::string> ? "a string"
                                                             : "a list of strings"));
  }
}

}  // namespace

AdapterConfig read_adapter_config(const std::string& dir) {
  const fs::path p = fs::path(dir) / "adapter_config.json";
  json j;
  try {
    j = io::parse_json<json>(read_text(p), fmt::format("[adapter] {}:", p.string()));
  } catch (const json::exception& e) {
    throw Error(fmt::format("[adapter] {}: not valid JSON ({})", p.string(), e.what()));
  }
  try {
    FG_CHECK(j.is_object(), "[adapter] {}: not a JSON object", p.string());
    const std::string peft_type = adapter_key<std::string>(j, "peft_type", p, std::string());
    FG_CHECK(peft_type == "LORA", "[adapter] {}: peft_type is '{}', expected LORA", p.string(),
             peft_type);
    AdapterConfig c;
    // Note [What an adapter must be]
    // Every reader (merge, generate --adapter, a resume) runs the adapter as plain LoRA, so a
    // config it would run wrongly is refused here, naming the key: r must be a positive
    // integer, the scaling (lora_alpha / r, or / sqrt(r) with rsLoRA) finite and positive;
    // DoRA (use_dora) and per-module ranks or alphas (rank_pattern, alpha_pattern) are PEFT
    // features fitgrad does not implement, so they are named as unsupported instead of
    // being merged as something else.
    FG_CHECK(j.contains("r"), "[adapter] {}: \"r\" is missing", p.string());
    const json& r = j.at("r");
    FG_CHECK(r.is_number_integer() && r.get<int64_t>() > 0,
             "[adapter] {}: \"r\" must be a positive integer, got {}", p.string(), r.dump());
    c.lora.r = r.get<int64_t>();
    c.lora.alpha = adapter_key<double>(j, "lora_alpha", p);
    c.lora.dropout = adapter_key<double>(j, "lora_dropout", p, 0.0);
    c.lora.use_rslora = adapter_key<bool>(j, "use_rslora", p, false);
    FG_CHECK(std::isfinite(c.lora.scaling()) && c.lora.scaling() > 0,
             "[adapter] {}: \"lora_alpha\" {} with \"r\" {} gives the scaling {}; it must be "
             "finite and positive",
             p.string(), c.lora.alpha, c.lora.r, c.lora.scaling());
    FG_CHECK(!adapter_key<bool>(j, "use_dora", p, false),
             "[adapter] {}: \"use_dora\" is true: DoRA adapters are not supported (only plain "
             "LoRA)",
             p.string());
    for (const char* key : {"rank_pattern", "alpha_pattern"})
      FG_CHECK(!j.contains(key) || j[key].is_null() || j[key].empty(),
               "[adapter] {}: \"{}\" is not supported (one r and lora_alpha for every layer), "
               "got {}",
               p.string(), key, j[key].dump());
    FG_CHECK(j.contains("target_modules"), "[adapter] {}: \"target_modules\" is missing",
             p.string());
    if (j.at("target_modules").is_string()) {
      c.target_modules = j.at("target_modules").get<std::string>();
    } else {
      const auto names = adapter_key<std::vector<std::string>>(j, "target_modules", p);
      c.target_modules = fmt::format("{}", fmt::join(names, ","));
    }
    c.base_model_name_or_path =
        adapter_key<std::string>(j, "base_model_name_or_path", p, std::string());
    const std::string bias = adapter_key<std::string>(j, "bias", p, std::string("none"));
    FG_CHECK(bias == "none", "[adapter] {}: bias '{}' is not supported (only \"none\")", p.string(),
             bias);
    return c;
  } catch (const json::exception& e) {
    throw Error(fmt::format("[adapter] {}: {}", p.string(), e.what()));
  }
}

std::vector<std::string> rank_problems(const AdapterConfig& config,
                                       const std::map<std::string, Tensor>& tensors) {
  std::vector<std::string> problems;
  for (const auto& [key, t] : tensors) {
    const bool a = key.ends_with(".lora_A.weight"), b = key.ends_with(".lora_B.weight");
    if ((!a && !b) || t.dim() != 2) continue;
    const int64_t rank = a ? t.size(0) : t.size(1);
    if (rank != config.lora.r)
      problems.push_back(fmt::format("'{}' has rank {} (shape {}), adapter_config.json's r is {}",
                                     key, rank, shape_str(t.shape()), config.lora.r));
  }
  return problems;
}

void load_lora_adapter(const Module& model, const std::string& dir) {
  const AdapterConfig config = read_adapter_config(dir);
  const auto layers = lora_layers(model);
  FG_CHECK(!layers.empty(), "[adapter] the model has no LoRA layer to load {} into", dir);
  const auto file =
      io::SafetensorsFile::open((fs::path(dir) / "adapter_model.safetensors").string());
  const auto tensors = file.tensors();
  std::vector<std::string> problems = rank_problems(config, tensors);
  std::map<std::string, int> expected;
  for (const LoraLinear* l : layers) {
    const LoraConfig& have = l->config();
    if (have.r != config.lora.r || have.alpha != config.lora.alpha ||
        have.use_rslora != config.lora.use_rslora)
      problems.push_back(
          fmt::format("{} has r {}, lora_alpha {}, use_rslora {}; the adapter r {}, lora_alpha {}, "
                      "use_rslora {}",
                      l->path(), have.r, have.alpha, have.use_rslora, config.lora.r,
                      config.lora.alpha, config.lora.use_rslora));
    for (const auto& [factor, t] :
         {std::pair{"lora_A", &l->lora_A()}, std::pair{"lora_B", &l->lora_B()}}) {
      const std::string key = peft_key(l->path(), factor);
      expected[key] = 1;
      const auto it = tensors.find(key);
      if (it == tensors.end())
        problems.push_back(fmt::format("'{}' is missing", key));
      else if (it->second.shape() != t->shape())
        problems.push_back(fmt::format("'{}' has shape {}, expected {}", key,
                                       shape_str(it->second.shape()), shape_str(t->shape())));
    }
  }
  for (const auto& [key, t] : tensors)
    if (!expected.count(key))
      problems.push_back(fmt::format("'{}' is not a LoRA factor of the model", key));
  if (!problems.empty())
    throw Error(fmt::format("[adapter] {}: {}", dir, fmt::join(problems, "; ")));
  autograd::NoGradGuard no_grad;
  for (const LoraLinear* l : layers) {
    Tensor a = l->lora_A(), b = l->lora_B();
    a.copy_(tensors.at(peft_key(l->path(), "lora_A")));
    b.copy_(tensors.at(peft_key(l->path(), "lora_B")));
  }
}

}  // namespace fitgrad::nn
