// libFuzzer target for the tokenizer.json reader (data/hf_tokenizer.h): the input is a
// tokenizer.json file. A file that reads builds its tokenizer, which encodes a fixed text
// (with and without special tokens) to ids inside the vocabulary that decode again.
// fitgrad::Error is the expected outcome for a file fitgrad refuses; anything else (a crash,
// a stack overflow past Note [JSON nesting bound], a sanitizer report, another exception)
// is a bug. The seeds are the tokenizer.json files of tests/golden/hf_tokenizers, and
// tokenizer_json.dict holds their keys and component types.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "data/gguf_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "fuzz/small_stack.h"
#include "fuzz/temp_file.h"
#include "tensor/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fitgrad::fuzz::TempFile scratch("tokenizer.json");
  const std::string& path = scratch.write(data, size);
  fitgrad::fuzz::on_small_stack([&] {
    std::unique_ptr<fitgrad::data::Tokenizer> tok;
    try {
      tok = fitgrad::data::tokenizer_from_vocabulary(fitgrad::data::hf_tokenizer_vocabulary(path),
                                                     "[fuzz]");
    } catch (const fitgrad::Error&) {
      return;
    }
    const std::string text =
        "Hello, world! 12345 <|endoftext|> \xC3\xA9t\xC3\xA9\n\t\xE4\xBD\xA0 done";
    for (const bool special : {false, true}) {
      std::vector<int32_t> ids;
      try {
        ids = tok->encode(text, special);
      } catch (const fitgrad::Error&) {
        continue;
      }
      for (const int32_t id : ids)
        if (id < 0 || id >= tok->vocab_size()) std::abort();
      try {
        tok->decode(ids);
      } catch (const fitgrad::Error&) {
      }
    }
  });
  return 0;
}
