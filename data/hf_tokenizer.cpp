// tokenizer.json into the vocabulary JSON (see hf_tokenizer.h).
//
// Note [tokenizer.json components]
// A tokenizer.json names its pipeline's parts; fitgrad reads the byte-level BPE ones:
//   model          "BPE" with vocab (text -> id, ids 0..n-1) and merges (each "a b" or, in
//                  tokenizers >= 0.20, ["a", "b"]), ignore_merges (Llama 3), no byte_fallback,
//                  no continuing_subword_prefix / end_of_word_suffix, no dropout;
//   normalizer     none, or NFC (Qwen2; data/nfc.h);
//   pre_tokenizer  ByteLevel with use_regex (GPT-2's pattern); Sequence[Split(Llama 3's or
//                  Qwen2's pattern, Isolated), ByteLevel without regex]; Sequence[Digits
//                  (individual_digits), ByteLevel with regex] (SmolLM); never add_prefix_space.
//                  Each maps to the hand-written matcher of data/pretokenizer.h;
//   decoder        ByteLevel;
//   post_processor ByteLevel, none, or TemplateProcessing whose single sequence starts with
//                  a special token: that token is the BOS;
//   added_tokens   each one an id in the model's vocabulary with the same text, or the next
//                  id past it; special ones are special tokens, the others are matched in the
//                  text as they stand (as tokenizers does); lstrip, rstrip and single_word
//                  are refused.
// Anything else (a Unigram or WordPiece model, SentencePiece-style BPE with byte_fallback,
// another normalizer, Metaspace, another Split pattern) is an error naming the component and
// its value, so a tokenizer fitgrad would get wrong never loads.
// The roles: tokenizer_config.json's bos_token and eos_token (a string or {"content": ...})
// when the folder has one, else the BOS of the post-processor; the EOS of generation comes
// from generation_config.json (apps/model_source.cpp).
#include "data/hf_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>

#include "data/pretokenizer.h"
#include "io/json_file.h"
#include "tensor/error.h"

namespace fitgrad::data {
namespace {

using nlohmann::json;

// Llama 3's and Qwen2's Split patterns as tokenizer.json holds them (Note [Pre-tokenizer
// patterns] in pretokenizer.cpp).
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

std::string type_of(const json& j) {
  return j.is_object() && j.contains("type") && j.at("type").is_string()
             ? j.at("type").get<std::string>()
             : std::string(j.is_null() ? "none" : "?");
}

bool flag(const json& j, const char* key, bool fallback) {
  return j.contains(key) && j.at(key).is_boolean() ? j.at(key).get<bool>() : fallback;
}

// A ByteLevel pre-tokenizer's regex flag; throws for add_prefix_space.
bool byte_level_regex(const json& j, const std::string& who) {
  FG_CHECK(!flag(j, "add_prefix_space", false),
           "{} pre_tokenizer ByteLevel with add_prefix_space is not supported", who);
  return flag(j, "use_regex", true);
}

// The GGUF pre-tokenizer name (pre_tokenizer_from_gguf) of a tokenizer.json pre_tokenizer.
std::string pre_name(const json& pre, const std::string& who) {
  const std::string type = type_of(pre);
  if (type == "ByteLevel" && byte_level_regex(pre, who)) return "gpt2";
  if (type == "Sequence" && pre.contains("pretokenizers") && pre.at("pretokenizers").is_array() &&
      pre.at("pretokenizers").size() == 2) {
    const json& first = pre.at("pretokenizers")[0];
    const json& second = pre.at("pretokenizers")[1];
    if (type_of(first) == "Split" && type_of(second) == "ByteLevel" &&
        !byte_level_regex(second, who)) {
      const json& pattern = first.value("pattern", json::object());
      const std::string regex = pattern.value("Regex", std::string());
      FG_CHECK(
          first.value("behavior", std::string()) == "Isolated" && !flag(first, "invert", false),
          "{} pre_tokenizer Split must be Isolated and not inverted", who);
      if (regex == kLlama3Pattern) return "llama-bpe";
      if (regex == kQwen2Pattern) return "qwen2";
      throw Error(fmt::format(
          "{} pre_tokenizer Split pattern {} is not one fitgrad implements (GPT-2's, Llama 3's, "
          "Qwen2's or SmolLM's)",
          who, pattern.dump()));
    }
    if (type_of(first) == "Digits" && flag(first, "individual_digits", false) &&
        type_of(second) == "ByteLevel" && byte_level_regex(second, who))
      return "smollm";
  }
  throw Error(
      fmt::format("{} pre_tokenizer {} is not supported (fitgrad reads byte-level BPE: ByteLevel, "
                  "Split + ByteLevel with Llama 3's or Qwen2's pattern, Digits + ByteLevel)",
                  who, pre.dump().substr(0, 200)));
}

// The text of a tokenizer_config.json role: a string or an AddedToken object.
std::optional<std::string> role_text(const json& config, const char* key) {
  if (!config.is_object() || !config.contains(key)) return std::nullopt;
  const json& v = config.at(key);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v.at("content").is_string())
    return v.at("content").get<std::string>();
  return std::nullopt;
}

json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", true},
          {"use_regex", use_regex}};
}

// The tokenizer.json pre_tokenizer of a GGUF pre-tokenizer name (the inverse of pre_name).
json pre_tokenizer_json(const std::string& pre) {
  const PreTokenizer p = pre_tokenizer_from_gguf(pre);
  const auto split = [](const char* pattern) {
    return json{{"type", "Split"},
                {"pattern", {{"Regex", pattern}}},
                {"behavior", "Isolated"},
                {"invert", false}};
  };
  switch (p) {
    case PreTokenizer::gpt2: return byte_level(true);
    case PreTokenizer::llama3:
      return {{"type", "Sequence"}, {"pretokenizers", {split(kLlama3Pattern), byte_level(false)}}};
    case PreTokenizer::qwen2:
      return {{"type", "Sequence"}, {"pretokenizers", {split(kQwen2Pattern), byte_level(false)}}};
    case PreTokenizer::smollm:
      return {
          {"type", "Sequence"},
          {"pretokenizers", {{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)}}};
    case PreTokenizer::none: break;
  }
  throw Error(fmt::format("[tokenizer] pre-tokenizer '{}' has no tokenizer.json form", pre));
}

}  // namespace

json hf_tokenizer_json(const json& vocabulary) {
  const auto tokens = vocabulary.at("tokens").get<std::vector<std::string>>();
  const auto types = vocabulary.at("token_types").get<std::vector<int32_t>>();
  json vocab = json::object(), added = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    vocab[tokens[i]] = i;
    const int32_t type = i < types.size() ? types[i] : 1;
    if (type == 3 || type == 4)
      added.push_back({{"id", i},
                       {"content", tokens[i]},
                       {"single_word", false},
                       {"lstrip", false},
                       {"rstrip", false},
                       {"normalized", type == 4},
                       {"special", type == 3}});
  }
  json merges = json::array();
  for (const std::string& m : vocabulary.at("merges").get<std::vector<std::string>>()) {
    const size_t space = m.find(' ');
    merges.push_back({m.substr(0, space), m.substr(space + 1)});
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer",
           vocabulary.value("normalizer", std::string()) == "NFC" ? json{{"type", "NFC"}} : json()},
          {"pre_tokenizer", pre_tokenizer_json(vocabulary.at("pre").get<std::string>())},
          {"post_processor",
           {{"type", "ByteLevel"},
            {"add_prefix_space", true},
            {"trim_offsets", false},
            {"use_regex", true}}},
          {"decoder", byte_level(true)},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"continuing_subword_prefix", nullptr},
            {"end_of_word_suffix", nullptr},
            {"fuse_unk", false},
            {"byte_fallback", false},
            {"ignore_merges", vocabulary.value("ignore_merges", false)},
            {"vocab", vocab},
            {"merges", merges}}}};
}

json hf_tokenizer_config(const json& vocabulary) {
  const auto tokens = vocabulary.at("tokens").get<std::vector<std::string>>();
  json config = {{"tokenizer_class", "PreTrainedTokenizerFast"},
                 {"clean_up_tokenization_spaces", false}};
  for (const char* role : {"bos", "eos", "pad"})
    if (vocabulary.contains(role) && !vocabulary.at(role).is_null())
      config[std::string(role) + "_token"] = tokens.at(vocabulary.at(role).get<size_t>());
  if (vocabulary.contains("chat_template"))
    config["chat_template"] = vocabulary.at("chat_template");
  return config;
}

json hf_tokenizer_vocabulary(const std::string& path, const json& config) {
  const std::string who = fmt::format("[tokenizer {}]", path);
  const json j = io::read_json_file(path, who);
  FG_CHECK(j.is_object() && j.contains("model") && j.at("model").is_object(),
           "{} has no object 'model' (not a tokenizers tokenizer.json)", who);
  const json& model = j.at("model");
  const std::string model_type = type_of(model);
  FG_CHECK(model_type == "BPE",
           "{} model type '{}' is not supported (fitgrad reads byte-level BPE; Unigram, "
           "WordPiece and WordLevel are not implemented)",
           who, model_type);
  FG_CHECK(!flag(model, "byte_fallback", false),
           "{} model BPE with byte_fallback (SentencePiece-style, as Llama 2 and Mistral) is "
           "not supported yet",
           who);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    FG_CHECK(
        !model.contains(key) || model.at(key).is_null() || model.at(key).get<std::string>().empty(),
        "{} model BPE with {} is not supported", who, key);
  FG_CHECK(!model.contains("dropout") || model.at("dropout").is_null() ||
               model.at("dropout").get<double>() == 0.0,
           "{} model BPE with dropout is not supported", who);
  const json normalizer = j.value("normalizer", json());
  FG_CHECK(normalizer.is_null() || type_of(normalizer) == "NFC",
           "{} normalizer {} is not supported (fitgrad reads none and NFC)", who,
           type_of(normalizer));
  const json decoder = j.value("decoder", json());
  FG_CHECK(type_of(decoder) == "ByteLevel",
           "{} decoder {} is not supported (byte-level BPE "
           "decodes with ByteLevel)",
           who, type_of(decoder));

  // Tokens by id.
  FG_CHECK(model.contains("vocab") && model.at("vocab").is_object(), "{} model has no vocab", who);
  const json& vocab = model.at("vocab");
  std::vector<std::string> tokens(vocab.size());
  std::vector<char> seen(vocab.size(), 0);
  for (const auto& [text, id] : vocab.items()) {
    FG_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 &&
                 id.get<int64_t>() < int64_t(tokens.size()) && !seen[id.get<size_t>()],
             "{} vocab['{}'] = {}: the ids must be 0..{} each once", who, text, id.dump(),
             tokens.size() - 1);
    seen[id.get<size_t>()] = 1;
    tokens[id.get<size_t>()] = text;
  }
  std::vector<int32_t> types(tokens.size(), 1);

  // Merges, as "a b".
  std::vector<std::string> merges;
  if (model.contains("merges")) {
    FG_CHECK(model.at("merges").is_array(), "{} model merges must be a list", who);
    merges.reserve(model.at("merges").size());
    for (const json& m : model.at("merges")) {
      if (m.is_string()) {
        merges.push_back(m.get<std::string>());
        continue;
      }
      FG_CHECK(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(),
               "{} merge {} is neither \"a b\" nor [\"a\", \"b\"]", who, m.dump());
      const std::string a = m[0].get<std::string>(), b = m[1].get<std::string>();
      FG_CHECK(a.find(' ') == std::string::npos && b.find(' ') == std::string::npos,
               "{} merge {} has a token with a space, which byte-level BPE never has", who,
               m.dump());
      merges.push_back(a + " " + b);
    }
  }

  // Added tokens: in the vocabulary already, or appended in id order.
  std::map<std::string, int32_t> added;  // text -> id
  if (j.contains("added_tokens")) {
    FG_CHECK(j.at("added_tokens").is_array(), "{} added_tokens must be a list", who);
    std::vector<json> list(j.at("added_tokens").begin(), j.at("added_tokens").end());
    std::sort(list.begin(), list.end(), [](const json& a, const json& b) {
      return a.value("id", int64_t(0)) < b.value("id", int64_t(0));
    });
    for (const json& t : list) {
      FG_CHECK(t.is_object() && t.contains("id") && t.at("id").is_number_integer() &&
                   t.contains("content") && t.at("content").is_string(),
               "{} added token {} needs an integer id and a string content", who, t.dump());
      const int64_t id = t.at("id").get<int64_t>();
      const std::string content = t.at("content").get<std::string>();
      for (const char* key : {"lstrip", "rstrip", "single_word"})
        FG_CHECK(!flag(t, key, false),
                 "{} added token '{}' (id {}) has {} true, which is not "
                 "supported",
                 who, content, id, key);
      const int32_t type = flag(t, "special", false) ? 3 : 4;
      if (id < int64_t(tokens.size())) {
        FG_CHECK(id >= 0, "{} added token '{}' has id {}", who, content, id);
        FG_CHECK(tokens[size_t(id)] == content,
                 "{} added token '{}' has id {}, which the vocab gives to '{}'", who, content, id,
                 tokens[size_t(id)]);
      } else {
        FG_CHECK(id == int64_t(tokens.size()),
                 "{} added token '{}' has id {}; the next free id is {} (ids must not leave gaps)",
                 who, content, id, tokens.size());
        tokens.push_back(content);
        types.push_back(type);
      }
      types[size_t(id)] = type;
      added[content] = int32_t(id);
    }
  }

  // Roles: tokenizer_config.json's, else the post-processor's BOS.
  std::optional<int32_t> bos, eos, pad;
  const auto id_of = [&](const std::string& text, const char* role) {
    const auto it = added.find(text);
    FG_CHECK(it != added.end(), "{} the {} '{}' is not an added token", who, role, text);
    return it->second;
  };
  const json post = j.value("post_processor", json());
  const std::string post_type = type_of(post);
  FG_CHECK(post_type == "none" || post_type == "ByteLevel" || post_type == "TemplateProcessing",
           "{} post_processor {} is not supported", who, post_type);
  if (post_type == "TemplateProcessing" && post.contains("single") &&
      post.at("single").is_array() && !post.at("single").empty() &&
      post.at("single")[0].contains("SpecialToken"))
    bos = id_of(post.at("single")[0].at("SpecialToken").at("id").get<std::string>(), "BOS");
  if (const auto text = role_text(config, "bos_token")) bos = id_of(*text, "bos_token");
  if (const auto text = role_text(config, "eos_token")) eos = id_of(*text, "eos_token");
  if (const auto text = role_text(config, "pad_token")) pad = id_of(*text, "pad_token");

  const auto id_json = [](std::optional<int32_t> id) { return id ? json(*id) : json(); };
  const std::string pre = pre_name(j.value("pre_tokenizer", json()), who);
  return json{{"name", "hf:" + pre},
              {"pre", pre},
              {"tokens", tokens},
              {"merges", merges},
              {"token_types", types},
              {"bos", id_json(bos)},
              {"eos", id_json(eos)},
              {"pad", id_json(pad)},
              {"ignore_merges", flag(model, "ignore_merges", false)},
              {"normalizer", normalizer.is_null() ? "" : "NFC"}};
}

}  // namespace fitgrad::data
