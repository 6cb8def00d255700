// text_model_config and text_model_name: see Note [Multimodal folders].
#include "nn/text_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <utility>

#include "tensor/error.h"

namespace fitgrad::nn {

// Note [Multimodal folders]
// Gemma 3 from 4B up ships as Gemma3ForConditionalGeneration: config.json has model_type
// "gemma3", the language model's keys under "text_config" and a SigLIP "vision_config"; the
// weights are language_model.model.* and language_model.lm_head.* (transformers 4.50 and
// 4.51, and the Hub's files), or model.language_model.* and lm_head.* (transformers 4.52 on),
// beside vision_tower.* and multi_modal_projector.*. transformers saves a composite config's
// text_config as its differences from Gemma3TextConfig's defaults (google/gemma-3-4b-it's
// names only hidden_size, intermediate_size, num_hidden_layers, sliding_window and
// rope_scaling), so the keys left out take those defaults. fitgrad reads such a folder as its
// text model, Gemma3ForCausalLM on the same weights: for text the two give the same logits
// (tests/golden/hf_gemma3_mm_tiny). The vision tower is not loaded, trained or exported.
namespace {

// Gemma3TextConfig's defaults (transformers 4.51) for the keys config_from_json requires.
const std::array<std::pair<const char*, nlohmann::json>, 10>& gemma3_text_defaults() {
  static const std::array<std::pair<const char*, nlohmann::json>, 10> defaults = {{
      {"vocab_size", 262208},
      {"hidden_size", 2304},
      {"intermediate_size", 9216},
      {"num_hidden_layers", 26},
      {"num_attention_heads", 8},
      {"num_key_value_heads", 4},
      {"head_dim", 256},
      {"max_position_embeddings", 131072},
      {"rms_norm_eps", 1e-6},
      {"rope_theta", 1000000.0},
  }};
  return defaults;
}

// The keys of Gemma3Config outside text_config; none changes the text model.
constexpr std::array kGemma3Keys = {"model_type",
                                    "architectures",
                                    "text_config",
                                    "vision_config",
                                    "boi_token_index",
                                    "eoi_token_index",
                                    "image_token_index",
                                    "mm_tokens_per_image",
                                    "initializer_range",
                                    "torch_dtype",
                                    "dtype",
                                    "transformers_version",
                                    "bos_token_id",
                                    "eos_token_id",
                                    "pad_token_id",
                                    "_name_or_path",
                                    "tie_word_embeddings",
                                    "use_cache"};

}  // namespace

bool is_multimodal_config(const nlohmann::json& j) {
  return j.is_object() && j.contains("model_type") && j.at("model_type") == "gemma3";
}

nlohmann::json text_model_config(const nlohmann::json& j, const std::string& source) {
  const std::string where = "[config " + source + "]";
  for (const auto& [key, value] : j.items())
    FG_CHECK(std::find(kGemma3Keys.begin(), kGemma3Keys.end(), key) != kGemma3Keys.end(),
             "{} unknown key '{}' for model_type gemma3 (fitgrad does not know what it changes)",
             where, key);
  FG_CHECK(j.contains("text_config") && j.at("text_config").is_object(),
           "{} model_type gemma3 needs an object 'text_config' (the language model's keys)", where);
  nlohmann::json text = j.at("text_config");
  const std::string type = text.value("model_type", std::string("gemma3_text"));
  FG_CHECK(type == "gemma3_text",
           "{} text_config's model_type is '{}'; a gemma3 folder's text model is gemma3_text",
           where, type);
  text["model_type"] = "gemma3_text";
  text["architectures"] = nlohmann::json::array({"Gemma3ForCausalLM"});
  for (const auto& [key, value] : gemma3_text_defaults())
    if (!text.contains(key)) text[key] = value;
  for (const char* key : {"torch_dtype", "transformers_version"})
    if (!text.contains(key) && j.contains(key)) text[key] = j.at(key);
  return text;
}

std::optional<std::string> text_model_name(std::string_view name) {
  for (const auto& [from, to] : {std::pair{"language_model.model.", "model."},
                                 {"model.language_model.", "model."},
                                 {"language_model.lm_head.", "lm_head."}})
    if (name.starts_with(from)) return to + std::string(name.substr(std::string_view(from).size()));
  if (name.starts_with("lm_head.")) return std::string(name);
  return std::nullopt;
}

}  // namespace fitgrad::nn
