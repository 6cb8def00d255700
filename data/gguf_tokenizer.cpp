// Reads the GGUF tokenizer keys into a BpeTokenizer.
#include "data/gguf_tokenizer.h"

namespace fitgrad::data {

BpeTokenizer tokenizer_from_gguf(const io::GgufFile& file) {
  const io::GgufMetadata& meta = file.metadata();
  FG_CHECK(meta.has("tokenizer.ggml.model"), "[gguf {}] has no tokenizer (tokenizer.ggml.model)",
           file.path());
  const std::string& model = meta.get_string("tokenizer.ggml.model");
  FG_CHECK(model == "gpt2",
           "[gguf {}] tokenizer model '{}' is not supported (only byte-level BPE, 'gpt2')",
           file.path(), model);
  const std::string pre = meta.has("tokenizer.ggml.pre") ? meta.get_string("tokenizer.ggml.pre")
                                                         : std::string("default");
  BpeVocabOptions options;
  options.name = "gguf:" + pre;
  if (meta.has("tokenizer.ggml.token_type"))
    options.token_types = meta.get_i32_array("tokenizer.ggml.token_type");
  auto id = [&](const char* key) -> std::optional<int32_t> {
    if (!meta.has(key)) return std::nullopt;
    return int32_t(meta.get_u32(key));
  };
  options.bos = id("tokenizer.ggml.bos_token_id");
  options.eos = id("tokenizer.ggml.eos_token_id");
  options.pad = id("tokenizer.ggml.padding_token_id");
  const std::vector<std::string> merges = meta.has("tokenizer.ggml.merges")
                                              ? meta.get_string_array("tokenizer.ggml.merges")
                                              : std::vector<std::string>{};
  return BpeTokenizer::from_vocab(meta.get_string_array("tokenizer.ggml.tokens"), merges,
                                  pre_tokenizer_from_gguf(pre), std::move(options));
}

}  // namespace fitgrad::data
