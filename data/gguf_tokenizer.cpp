// Reads the GGUF tokenizer keys into JSON and a BpeTokenizer (see gguf_tokenizer.h).
#include "data/gguf_tokenizer.h"

#include <fmt/format.h>

namespace fitgrad::data {

nlohmann::json gguf_vocabulary(const io::GgufFile& file) {
  const io::GgufMetadata& meta = file.metadata();
  FG_CHECK(meta.has("tokenizer.ggml.model"), "[gguf {}] has no tokenizer (tokenizer.ggml.model)",
           file.path());
  const std::string& model = meta.get_string("tokenizer.ggml.model");
  FG_CHECK(model == "gpt2",
           "[gguf {}] tokenizer model '{}' is not supported (only byte-level BPE, 'gpt2')",
           file.path(), model);
  auto id = [&](const char* key) -> nlohmann::json {
    if (!meta.has(key)) return nullptr;
    return int32_t(meta.get_u32(key));
  };
  return {
      {"pre", meta.has("tokenizer.ggml.pre") ? meta.get_string("tokenizer.ggml.pre")
                                             : std::string("default")},
      {"tokens", meta.get_string_array("tokenizer.ggml.tokens")},
      {"merges", meta.has("tokenizer.ggml.merges") ? meta.get_string_array("tokenizer.ggml.merges")
                                                   : std::vector<std::string>{}},
      {"token_types", meta.has("tokenizer.ggml.token_type")
                          ? meta.get_i32_array("tokenizer.ggml.token_type")
                          : std::vector<int32_t>{}},
      {"bos", id("tokenizer.ggml.bos_token_id")},
      {"eos", id("tokenizer.ggml.eos_token_id")},
      {"pad", id("tokenizer.ggml.padding_token_id")}};
}

BpeTokenizer tokenizer_from_vocabulary(const nlohmann::json& vocab, const std::string& where) {
  try {
    const std::string pre = vocab.at("pre").get<std::string>();
    BpeVocabOptions options;
    options.name = vocab.value("name", "gguf:" + pre);
    options.token_types = vocab.at("token_types").get<std::vector<int32_t>>();
    auto id = [&](const char* key) -> std::optional<int32_t> {
      if (vocab.at(key).is_null()) return std::nullopt;
      return vocab.at(key).get<int32_t>();
    };
    options.bos = id("bos");
    options.eos = id("eos");
    options.pad = id("pad");
    options.ignore_merges = vocab.value("ignore_merges", false);
    options.nfc = vocab.value("normalizer", std::string()) == "NFC";
    return BpeTokenizer::from_vocab(vocab.at("tokens").get<std::vector<std::string>>(),
                                    vocab.at("merges").get<std::vector<std::string>>(),
                                    pre_tokenizer_from_gguf(pre), std::move(options));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{} the stored vocabulary is malformed: {}", where, e.what()));
  }
}

BpeTokenizer tokenizer_from_gguf(const io::GgufFile& file) {
  return tokenizer_from_vocabulary(gguf_vocabulary(file), fmt::format("[gguf {}]", file.path()));
}

}  // namespace fitgrad::data
