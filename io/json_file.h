// A JSON file read whole: the one reader of the configuration files a model folder or a
// checkpoint holds (config.json, the safetensors index, tokenizer and generation configs,
// fitgrad_tokenizer.json). `where` starts both errors: "<where> cannot open the file" and
// "<where> invalid JSON: <the parser's message>".
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace fitgrad::io {

nlohmann::json read_json_file(const std::string& path, const std::string& where);

}  // namespace fitgrad::io
