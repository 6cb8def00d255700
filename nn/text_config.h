// The text model inside a multimodal Hugging Face folder: its config.json as the config of
// the text model alone, and the weight names that move it there (Note [Multimodal folders]
// in text_config.cpp). fitgrad trains and writes the text model; the vision tower stays out.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace fitgrad::nn {

// True for a config.json whose model is multimodal with a text model fitgrad reads (model_type
// "gemma3": Gemma3ForConditionalGeneration).
bool is_multimodal_config(const nlohmann::json& j);
// The config.json of the text model of a multimodal config `j` (its text_config with the text
// config class's defaults for the keys left out, model_type and architectures of the causal
// LM); `source` names the file in errors. Throws for a key of `j` it does not know.
nlohmann::json text_model_config(const nlohmann::json& j, const std::string& source);
// The name of a multimodal checkpoint's tensor in the text model ("language_model.model.X" or
// "model.language_model.X" -> "model.X", "language_model.lm_head.weight" -> "lm_head.weight");
// nullopt for a tensor outside it (the vision tower, the projector).
std::optional<std::string> text_model_name(std::string_view name);

}  // namespace fitgrad::nn
