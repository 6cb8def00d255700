// libFuzzer target for the GPT-2 vocabulary loader (BpeTokenizer::from_gpt2_files,
// data/bpe_tokenizer.cpp). The input is cut at its first NUL byte: the bytes before are
// encoder.json, the bytes after are vocab.bpe (an input without a NUL has an empty
// vocab.bpe). Each goes to a scratch file and the pair is loaded. fitgrad::Error is the
// expected outcome for malformed files; anything else (a crash, a sanitizer report,
// InternalError, another exception) is a bug. A tokenizer that loads encodes a fixed text
// to ids inside its vocabulary, and decodes them.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "data/bpe_tokenizer.h"
#include "fuzz/temp_file.h"
#include "tensor/error.h"

namespace {
volatile size_t sink;  // keeps the decoded text from being optimised away
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fitgrad::fuzz::TempFile encoder("encoder.json"), vocab("vocab.bpe");
  const auto* nul = static_cast<const uint8_t*>(std::memchr(data, 0, size));
  const size_t cut = nul ? size_t(nul - data) : size;
  encoder.write(data, cut);
  vocab.write(data + cut + (nul ? 1 : 0), size - cut - (nul ? 1 : 0));
  std::optional<fitgrad::data::BpeTokenizer> tok;
  try {
    tok = fitgrad::data::BpeTokenizer::from_gpt2_files(encoder.path(), vocab.path());
  } catch (const fitgrad::Error&) {
  }
  if (!tok) return 0;
  const std::string text = "Hello, world! 12345 <|endoftext|> \xC3\xA9t\xC3\xA9\n\tdone";
  for (bool special : {false, true}) {
    std::vector<int32_t> ids;
    try {
      ids = tok->encode(text, special);
    } catch (const fitgrad::Error&) {
    }
    for (int32_t id : ids)
      if (id < 0 || id >= tok->vocab_size()) std::abort();
    sink = tok->decode(ids).size();
  }
  return 0;
}
