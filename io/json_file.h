// A JSON file read whole: the one reader of the configuration files a model folder or a
// checkpoint holds (config.json, the safetensors index, tokenizer and generation configs,
// fitgrad_tokenizer.json). `where` starts both errors: "<where> cannot open the file" and
// "<where> invalid JSON: <the parser's message>". And json_text, the one way the files a run or
// a command writes (metrics.jsonl, eval_samples.jsonl, trainer_state.json, the checkpoint
// manifest, config.json, adapter_config.json, the export's index) turn JSON into text.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace fitgrad::io {

nlohmann::json read_json_file(const std::string& path, const std::string& where);

// Note [Invalid UTF-8 in written JSON]
// A string bound for a JSON file may hold bytes that are not UTF-8: a completion cut inside a
// character (--eval_max_new_tokens 1 on a Chinese prompt), any completion of a byte-level
// model, a path whose name is not UTF-8. nlohmann's default dump throws for it, which would end
// a run after it trained, before its checkpoint; json_text writes it as the dump's
// error_handler_t::replace mode does, U+FFFD for each ill-formed sequence, and never throws.
// A record whose text the reader should know was replaced says so itself (eval_samples.jsonl's
// "invalid_utf8_replaced", train/eval_prompts.cpp).
template <class Json>
std::string json_text(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace fitgrad::io
