// Reads the GGUF tokenizer keys into JSON and a tokenizer (see gguf_tokenizer.h).
#include "data/gguf_tokenizer.h"

#include <fmt/format.h>

#include "data/bpe_tokenizer.h"

namespace fitgrad::data {
namespace {

using nlohmann::json;

// The added tokens' rules of a vocabulary JSON ("added_rules": [{"id", "lstrip", "rstrip",
// "single_word", "normalized"}]), by id, and the ids matched in normalized text.
std::map<int32_t, AddedTokenRule> rules_of(const json& vocab, std::vector<int32_t>* normalized) {
  std::map<int32_t, AddedTokenRule> rules;
  for (const json& r : vocab.value("added_rules", json::array())) {
    const int32_t id = r.at("id").get<int32_t>();
    rules[id] = AddedTokenRule{r.value("lstrip", false), r.value("rstrip", false),
                               r.value("single_word", false)};
    if (normalized != nullptr && r.value("normalized", false)) normalized->push_back(id);
  }
  return rules;
}

std::optional<int32_t> id_at(const json& vocab, const char* key) {
  if (!vocab.contains(key) || vocab.at(key).is_null()) return std::nullopt;
  return vocab.at(key).get<int32_t>();
}

constexpr const char* kMetaspaceNames[] = {"none", "always", "first", "never"};
constexpr const char* kDecoderNames[] = {"plain", "strip", "metaspace"};

template <class Enum, size_t N>
Enum enum_of(const json& j, const char* key, const char* const (&names)[N]) {
  const std::string name = j.at(key).get<std::string>();
  for (size_t i = 0; i < N; ++i)
    if (name == names[i]) return Enum(i);
  throw json::other_error::create(501, fmt::format("unknown {} '{}'", key, name), &j);
}

}  // namespace

json spm_options_json(const SpmOptions& o) {
  return {{"prepend", o.normalizer_prepend},
          {"replace", o.normalizer_replace},
          {"metaspace", kMetaspaceNames[size_t(o.metaspace)]},
          {"split", o.metaspace_split},
          {"byte_fallback", o.byte_fallback},
          {"fuse_unk", o.fuse_unk},
          {"decoder", kDecoderNames[size_t(o.decoder)]}};
}

SpmOptions spm_options_from_json(const json& vocab) {
  const json& spm = vocab.at("spm");
  SpmOptions o;
  o.normalizer_prepend = spm.at("prepend").get<bool>();
  o.normalizer_replace = spm.at("replace").get<bool>();
  o.metaspace = enum_of<SpmOptions::Metaspace>(spm, "metaspace", kMetaspaceNames);
  o.metaspace_split = spm.at("split").get<bool>();
  o.byte_fallback = spm.at("byte_fallback").get<bool>();
  o.fuse_unk = spm.at("fuse_unk").get<bool>();
  o.decoder = enum_of<SpmOptions::Decoder>(spm, "decoder", kDecoderNames);
  o.rules = rules_of(vocab, &o.normalized_added);
  return o;
}

namespace {

// The vocabulary with the file's chat template (tokenizer.chat_template), when it has one.
// The file's chat template and, when it says, whether a text starts with the bos (Note [The
// bos a text starts with] in hf_tokenizer.cpp).
json with_file_keys(json vocabulary, const io::GgufMetadata& meta) {
  if (meta.has("tokenizer.chat_template"))
    vocabulary["chat_template"] = meta.get_string("tokenizer.chat_template");
  if (meta.has("tokenizer.ggml.add_bos_token"))
    vocabulary["add_bos"] = meta.get_bool("tokenizer.ggml.add_bos_token");
  return vocabulary;
}

}  // namespace

json gguf_vocabulary(const io::GgufFile& file) {
  const io::GgufMetadata& meta = file.metadata();
  FG_CHECK(meta.has("tokenizer.ggml.model"), "[gguf {}] has no tokenizer (tokenizer.ggml.model)",
           file.path());
  const std::string& model = meta.get_string("tokenizer.ggml.model");
  FG_CHECK(model == "gpt2" || model == "llama",
           "[gguf {}] tokenizer model '{}' is not supported (byte-level BPE 'gpt2' and "
           "SentencePiece 'llama' are)",
           file.path(), model);
  auto id = [&](const char* key) -> json {
    if (!meta.has(key)) return nullptr;
    return int32_t(meta.get_u32(key));
  };
  const std::vector<std::string> tokens = meta.get_string_array("tokenizer.ggml.tokens");
  const std::vector<int32_t> types = meta.has("tokenizer.ggml.token_type")
                                         ? meta.get_i32_array("tokenizer.ggml.token_type")
                                         : std::vector<int32_t>{};
  if (model == "llama") {
    // llama.cpp's SentencePiece: merges from the scores, a "▁" before each stretch of text
    // when add_space_prefix (its default), bytes for characters without a token (Note
    // [SentencePiece pipelines]).
    FG_CHECK(meta.has("tokenizer.ggml.scores"),
             "[gguf {}] SentencePiece tokenizer without tokenizer.ggml.scores", file.path());
    const bool space_prefix = !meta.has("tokenizer.ggml.add_space_prefix") ||
                              meta.get_bool("tokenizer.ggml.add_space_prefix");
    SpmOptions o;
    o.normalizer_prepend = space_prefix;
    o.normalizer_replace = true;
    o.decoder = space_prefix ? SpmOptions::Decoder::strip : SpmOptions::Decoder::plain;
    json v = {{"model", "spm"},
              {"name", "gguf:spm"},
              {"pre", "spm"},
              {"tokens", tokens},
              {"merges", SpmTokenizer::merges_from_scores(
                             tokens, meta.get_f32_array("tokenizer.ggml.scores"), types)},
              {"token_types", types},
              {"bos", id("tokenizer.ggml.bos_token_id")},
              {"eos", id("tokenizer.ggml.eos_token_id")},
              {"pad", id("tokenizer.ggml.padding_token_id")},
              {"unk", id("tokenizer.ggml.unknown_token_id")},
              {"spm", spm_options_json(o)}};
    return with_file_keys(std::move(v), meta);
  }
  return with_file_keys(
      {{"pre", meta.has("tokenizer.ggml.pre") ? meta.get_string("tokenizer.ggml.pre")
                                              : std::string("default")},
       {"tokens", tokens},
       {"merges", meta.has("tokenizer.ggml.merges") ? meta.get_string_array("tokenizer.ggml.merges")
                                                    : std::vector<std::string>{}},
       {"token_types", types},
       {"bos", id("tokenizer.ggml.bos_token_id")},
       {"eos", id("tokenizer.ggml.eos_token_id")},
       {"pad", id("tokenizer.ggml.padding_token_id")}},
      meta);
}

std::unique_ptr<Tokenizer> tokenizer_from_vocabulary(const json& vocab, const std::string& where) {
  try {
    if (vocab.value("model", std::string()) == "spm") {
      SpmOptions options = spm_options_from_json(vocab);
      options.name = vocab.value("name", std::string("spm"));
      options.token_types = vocab.at("token_types").get<std::vector<int32_t>>();
      options.bos = id_at(vocab, "bos");
      options.eos = id_at(vocab, "eos");
      options.pad = id_at(vocab, "pad");
      options.unk = id_at(vocab, "unk");
      options.ignore_merges = vocab.value("ignore_merges", false);
      return std::make_unique<SpmTokenizer>(SpmTokenizer::from_vocab(
          vocab.at("tokens").get<std::vector<std::string>>(),
          vocab.at("merges").get<std::vector<std::string>>(), std::move(options)));
    }
    const std::string pre = vocab.at("pre").get<std::string>();
    BpeVocabOptions options;
    options.name = vocab.value("name", "gguf:" + pre);
    options.token_types = vocab.at("token_types").get<std::vector<int32_t>>();
    options.bos = id_at(vocab, "bos");
    options.eos = id_at(vocab, "eos");
    options.pad = id_at(vocab, "pad");
    options.ignore_merges = vocab.value("ignore_merges", false);
    options.nfc = vocab.value("normalizer", std::string()) == "NFC";
    options.rules = rules_of(vocab, nullptr);
    return std::make_unique<BpeTokenizer>(
        BpeTokenizer::from_vocab(vocab.at("tokens").get<std::vector<std::string>>(),
                                 vocab.at("merges").get<std::vector<std::string>>(),
                                 pre_tokenizer_from_gguf(pre), std::move(options)));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{} the stored vocabulary is malformed: {}", where, e.what()));
  } catch (const Error& e) {  // a merge or a role the tokenizer refuses: name the file
    throw Error(fmt::format("{} {}", where, e.what()));
  }
}

std::unique_ptr<Tokenizer> tokenizer_from_gguf(const io::GgufFile& file) {
  return tokenizer_from_vocabulary(gguf_vocabulary(file), fmt::format("[gguf {}]", file.path()));
}

}  // namespace fitgrad::data
