// JSON text that a user gives (dataset records, --messages and --eval_prompts files,
// config.json, tokenizer.json, adapter_config.json, safetensors headers, ...) parsed with a
// bound on its nesting: parse_json checks the depth first, then parses with nlohmann.
//
// Note [JSON nesting bound]
// nlohmann parses without recursion, but a parsed value is copied, compared, dumped and
// turned into Jinja values by recursive code, so a record nesting 100,000 arrays ran the
// stack out (SIGSEGV) after it parsed. Every JSON text from a user therefore goes through
// check_json_depth, one linear scan that counts brackets outside strings and refuses more
// than kMaxJsonDepth open arrays and objects, naming the place. The bound is far above real
// data (tool schemas nest a few dozen levels) and below what Python's json module reads
// (its recursion limit of 1,000 frames), so nothing that transformers or datasets read is
// refused.
#pragma once

#include <string_view>

namespace fitgrad::io {

inline constexpr int kMaxJsonDepth = 512;

// Throws fitgrad::Error "<where> JSON nests deeper than 512 arrays and objects (at line L,
// column C) ..." when `text` opens more than kMaxJsonDepth arrays and objects at once; a text
// of one line is placed by its column alone. Malformed text is left to the parser.
void check_json_depth(std::string_view text, std::string_view where);

// check_json_depth, then Json::parse(text); nlohmann's exceptions pass to the caller.
template <class Json>
Json parse_json(std::string_view text, std::string_view where) {
  check_json_depth(text, where);
  return Json::parse(text.begin(), text.end());
}

}  // namespace fitgrad::io
