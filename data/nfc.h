// Unicode Normalization Form C (UAX #15), the normalizer of Qwen2's tokenizer.json: canonical
// decomposition, canonical ordering of combining marks, then canonical composition. Bytes that
// are not well-formed UTF-8 pass through unchanged and end any run of marks (Note [Invalid
// UTF-8] in data/pretokenizer.cpp). The tables are tools/gen_unicode_nfc.py's.
#pragma once

#include <string>
#include <string_view>

namespace fitgrad::data {

std::string nfc(std::string_view text);

// The Unicode version of the tables.
const char* nfc_unicode_version();

}  // namespace fitgrad::data
