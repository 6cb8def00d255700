// tokenizer.json into the vocabulary JSON (see hf_tokenizer.h).
//
// Note [tokenizer.json components]
// A tokenizer.json names its pipeline's parts; fitgrad reads those of byte-level BPE and of
// SentencePiece-style BPE (the latter's are listed after the first):
//   model          "BPE" with vocab (text -> id, ids 0..n-1) and merges (each "a b" or, in
//                  tokenizers >= 0.20, ["a", "b"]), ignore_merges (Llama 3), no
//                  continuing_subword_prefix / end_of_word_suffix, no dropout;
//   normalizer     none, or NFC (Qwen2; data/nfc.h);
//   pre_tokenizer  ByteLevel with use_regex (GPT-2's pattern); Sequence[Split(Llama 3's or
//                  Qwen2's pattern, Isolated), ByteLevel without regex]; Sequence[Digits
//                  (individual_digits), ByteLevel with regex] (SmolLM); never add_prefix_space.
//                  Each maps to the hand-written matcher of data/pretokenizer.h;
//   decoder        ByteLevel;
//   post_processor ByteLevel, none, or TemplateProcessing, alone or in a Sequence after
//                  ByteLevel: a special token first in its single sequence is the BOS, which
//                  every text starts with (Note [The bos a text starts with]);
//   added_tokens   each one an id in the model's vocabulary with the same text, or the next
//                  id past it; special ones are special tokens, the others are matched in the
//                  text as they stand (as tokenizers does), with their lstrip, rstrip and
//                  single_word (Note [Added-token matching] in tokenizer.cpp).
// SentencePiece-style BPE (Llama 2, Mistral, Gemma, Phi-3; Note [SentencePiece pipelines] in
// spm_tokenizer.cpp), told apart by a decoder that is not ByteLevel:
//   model          byte_fallback, unk_token, fuse_unk;
//   normalizer     none, Prepend("▁"), Replace(" " -> "▁"), or a Sequence of those;
//   pre_tokenizer  none, Metaspace("▁", prepend_scheme, split), or Split(" ",
//                  MergedWithPrevious) after a normalizer that left no space (Gemma's no-op);
//   decoder        Sequence[Replace("▁" -> " "), ByteFallback, Fuse, Strip(" ", 1, 0)]
//                  with or without the Strip, or Metaspace;
//   added_tokens   as above, and normalized=true on a non-special token: matched in the
//                  normalized text.
// Anything else (a Unigram or WordPiece model, another normalizer, another Split pattern or
// decoder) is an error naming the component and its value, so a tokenizer fitgrad would get
// wrong never loads.
// The roles: tokenizer_config.json's bos_token and eos_token (a string or {"content": ...})
// when the folder has one, else the BOS of the post-processor; the EOS of generation comes
// from generation_config.json (train/model_source.cpp).
#include "data/hf_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <optional>

#include "data/gguf_tokenizer.h"
#include "data/pretokenizer.h"
#include "data/spm_tokenizer.h"
#include "io/json_file.h"
#include "tensor/error.h"

namespace fitgrad::data {
namespace {

using nlohmann::json;

constexpr const char* kMetaspaceSchemes[] = {"always", "first", "never"};

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

constexpr const char* kMeta = "\xE2\x96\x81";  // U+2581, SentencePiece's space

bool is_replace(const json& j, const char* from, const char* to) {
  return type_of(j) == "Replace" && j.contains("pattern") && j.at("pattern").is_object() &&
         j.at("pattern").value("String", std::string()) == from &&
         j.value("content", std::string()) == to;
}

// The parts of a component that may be a Sequence (`list` names its array).
std::vector<json> parts_of(const json& j, const char* list) {
  if (j.is_null()) return {};
  if (type_of(j) != "Sequence") return {j};
  FG_CHECK(j.contains(list) && j.at(list).is_array(), "Sequence without '{}'", list);
  return {j.at(list).begin(), j.at(list).end()};
}

// The normalizer, pre-tokenizer and decoder of a SentencePiece-style tokenizer.json
// (Note [tokenizer.json components]) into `o`.
void read_spm_pipeline(const json& j, const std::string& who, SpmOptions& o) {
  for (const json& part : parts_of(j.value("normalizer", json()), "normalizers")) {
    if (type_of(part) == "Prepend" && part.value("prepend", std::string()) == kMeta)
      o.normalizer_prepend = true;
    else if (is_replace(part, " ", kMeta))
      o.normalizer_replace = true;
    else
      throw Error(fmt::format(
          "{} normalizer {} is not supported (SentencePiece-style BPE reads Prepend(\"▁\") and "
          "Replace(\" \" -> \"▁\"))",
          who, part.dump().substr(0, 200)));
  }
  const json pre = j.value("pre_tokenizer", json());
  std::string scheme;
  if (type_of(pre) == "Metaspace") {
    FG_CHECK(pre.value("replacement", std::string(kMeta)) == kMeta,
             "{} pre_tokenizer Metaspace with replacement {} is not supported", who,
             pre.value("replacement", json()).dump());
    scheme = pre.value("prepend_scheme", std::string());
    if (scheme.empty()) {  // the older add_prefix_space, as tokenizers reads it
      FG_CHECK(flag(pre, "add_prefix_space", true),
               "{} pre_tokenizer Metaspace has add_prefix_space false and no prepend_scheme, "
               "which tokenizers refuses too; write \"prepend_scheme\": \"never\"",
               who);
      scheme = "always";
    }
    const auto it = std::find(std::begin(kMetaspaceSchemes), std::end(kMetaspaceSchemes), scheme);
    FG_CHECK(it != std::end(kMetaspaceSchemes),
             "{} pre_tokenizer Metaspace prepend_scheme '{}' is not always, first or never", who,
             scheme);
    o.metaspace = SpmOptions::Metaspace(it - std::begin(kMetaspaceSchemes) + 1);
    o.metaspace_split = flag(pre, "split", true);
  } else if (!(pre.is_null() ||
               (type_of(pre) == "Split" && o.normalizer_replace &&
                pre.value("pattern", json::object()).value("String", std::string()) == " "))) {
    throw Error(fmt::format(
        "{} pre_tokenizer {} is not supported with SentencePiece-style BPE (none, Metaspace, "
        "or Gemma's Split on spaces that the normalizer has replaced)",
        who, pre.dump().substr(0, 200)));
  }
  const json dec = j.value("decoder", json());
  if (type_of(dec) == "Metaspace") {
    o.decoder = dec.value("prepend_scheme", std::string()) == "never"
                    ? SpmOptions::Decoder::plain
                    : SpmOptions::Decoder::metaspace;
    return;
  }
  const std::vector<json> steps = parts_of(dec, "decoders");
  FG_CHECK(!steps.empty() && is_replace(steps[0], kMeta, " "),
           "{} decoder {} is not supported (SentencePiece-style BPE decodes with "
           "Sequence[Replace(\"▁\" -> \" \"), ByteFallback, Fuse, Strip] or Metaspace)",
           who, dec.dump().substr(0, 200));
  o.decoder = SpmOptions::Decoder::plain;
  for (size_t i = 1; i < steps.size(); ++i) {
    const std::string t = type_of(steps[i]);
    if (t == "ByteFallback" || t == "Fuse") continue;
    FG_CHECK(t == "Strip" && i + 1 == steps.size() &&
                 steps[i].value("content", std::string()) == " " &&
                 steps[i].value("start", 0) == 1 && steps[i].value("stop", 0) == 0,
             "{} decoder step {} is not supported (ByteFallback, Fuse, and a last Strip(\" \", "
             "1, 0))",
             who, steps[i].dump().substr(0, 200));
    o.decoder = SpmOptions::Decoder::strip;
  }
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

// Note [The bos a text starts with]
// transformers' tokenizer(text) puts the bos first when the tokenizer's post-processor says so:
// a TemplateProcessing whose single sequence starts with a special token (SentencePiece
// vocabularies, Llama 3, and any other byte-level BPE saved so), alone or in a Sequence after
// ByteLevel (Llama 3's own file). tokenizer_config.json's add_bos_token does not change it:
// transformers 5 keeps tokenizer.json's post-processor for every tokenizer class (4.46 rebuilt
// it from add_bos_token for Llama's and Gemma's classes, so a folder whose config says false
// beside a template that adds the bos, as Phi-3's, started texts without it there). The
// vocabulary records the outcome as "add_bos"; a vocabulary without it (an older checkpoint's,
// a GGUF file without tokenizer.ggml.add_bos_token) adds the bos for SentencePiece and Llama
// 3's pre-tokenizer, as llama.cpp defaults. Every path that turns text into ids adds it where
// transformers does (text_ids in hf_tokenizer.h; data/sft_encode.h;
// data/token_dataset.h); a chat template writes its own, as apply_chat_template tokenizes
// with add_special_tokens=False.

// The TemplateProcessing that puts the vocabulary's bos before each sequence.
json bos_template(const json& vocabulary) {
  const json bos = vocabulary.at("bos");
  const std::string text = vocabulary.at("tokens").at(bos.get<size_t>()).get<std::string>();
  const auto token = [&](int type_id) {
    return json{{"SpecialToken", {{"id", text}, {"type_id", type_id}}}};
  };
  const auto sequence = [](const char* id, int type_id) {
    return json{{"Sequence", {{"id", id}, {"type_id", type_id}}}};
  };
  return {{"type", "TemplateProcessing"},
          {"single", {token(0), sequence("A", 0)}},
          {"pair", {token(0), sequence("A", 0), token(1), sequence("B", 1)}},
          {"special_tokens", {{text, {{"id", text}, {"ids", {bos}}, {"tokens", {text}}}}}}};
}

// The text of the special token that the post-processor puts before a single sequence, if any.
std::optional<std::string> post_processor_bos(const json& j, const std::string& who) {
  const json post = j.value("post_processor", json());
  const bool sequence = type_of(post) == "Sequence";
  FG_CHECK(!sequence || (post.contains("processors") && post.at("processors").is_array()),
           "{} post_processor Sequence without a list 'processors'", who);
  const json steps = sequence ? post.at("processors") : json::array({post});
  std::optional<std::string> bos;
  for (const json& step : steps) {
    const std::string type = type_of(step);
    FG_CHECK(type == "none" || type == "ByteLevel" || type == "TemplateProcessing",
             "{} post_processor {} is not supported (ByteLevel, TemplateProcessing, or a "
             "Sequence of them)",
             who, type);
    if (type != "TemplateProcessing") continue;
    const json single = step.value("single", json());
    if (single.is_array() && !single.empty() && single[0].is_object() &&
        single[0].contains("SpecialToken")) {
      const json& id = single[0].at("SpecialToken").value("id", json());
      FG_CHECK(id.is_string(),
               "{} post_processor TemplateProcessing: a SpecialToken without a string id", who);
      bos = id.get<std::string>();
    }
  }
  return bos;
}

}  // namespace

json hf_tokenizer_json(const json& vocabulary) {
  const auto tokens = vocabulary.at("tokens").get<std::vector<std::string>>();
  const auto types = vocabulary.at("token_types").get<std::vector<int32_t>>();
  const bool spm = vocabulary.value("model", std::string()) == "spm";
  std::map<int64_t, json> rules;
  for (const json& r : vocabulary.value("added_rules", json::array()))
    rules[r.at("id").get<int64_t>()] = r;
  json vocab = json::object(), added = json::array();
  for (size_t i = 0; i < tokens.size(); ++i) {
    vocab[tokens[i]] = i;
    const int32_t type = i < types.size() ? types[i] : 1;
    if (type == 2 || type == 3 || type == 4) {
      const json rule = rules.count(int64_t(i)) ? rules.at(int64_t(i)) : json::object();
      added.push_back({{"id", i},
                       {"content", tokens[i]},
                       {"single_word", rule.value("single_word", false)},
                       {"lstrip", rule.value("lstrip", false)},
                       {"rstrip", rule.value("rstrip", false)},
                       {"normalized", type == 4 && (!spm || rule.value("normalized", false))},
                       {"special", type != 4}});
    }
  }
  json merges = json::array();
  for (const std::string& m : vocabulary.at("merges").get<std::vector<std::string>>()) {
    const size_t space = m.find(' ');
    merges.push_back({m.substr(0, space), m.substr(space + 1)});
  }
  json out = {{"version", "1.0"},
              {"truncation", nullptr},
              {"padding", nullptr},
              {"added_tokens", added},
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
  if (spm) {
    const SpmOptions o = spm_options_from_json(vocabulary);
    const auto replace = [](const char* from, const char* to) {
      return json{{"type", "Replace"}, {"pattern", {{"String", from}}}, {"content", to}};
    };
    json normalizers = json::array();
    if (o.normalizer_prepend) normalizers.push_back({{"type", "Prepend"}, {"prepend", kMeta}});
    if (o.normalizer_replace) normalizers.push_back(replace(" ", kMeta));
    out["normalizer"] = normalizers.empty() ? json()
                        : normalizers.size() == 1
                            ? normalizers[0]
                            : json{{"type", "Sequence"}, {"normalizers", normalizers}};
    out["pre_tokenizer"] =
        o.metaspace == SpmOptions::Metaspace::none
            ? json()
            : json{{"type", "Metaspace"},
                   {"replacement", kMeta},
                   {"prepend_scheme", kMetaspaceSchemes[size_t(o.metaspace) - 1]},
                   {"split", o.metaspace_split}};
    json steps = {replace(kMeta, " "), {{"type", "ByteFallback"}}, {{"type", "Fuse"}}};
    if (o.decoder == SpmOptions::Decoder::strip)
      steps.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    out["decoder"] = o.decoder == SpmOptions::Decoder::metaspace
                         ? json{{"type", "Metaspace"},
                                {"replacement", kMeta},
                                {"prepend_scheme", "always"},
                                {"split", false}}
                         : json{{"type", "Sequence"}, {"decoders", steps}};
    out["post_processor"] = vocabulary_adds_bos(vocabulary) ? bos_template(vocabulary) : json();
    json& m = out["model"];
    const json unk = vocabulary.value("unk", json());
    m["unk_token"] = unk.is_null() ? json() : json(tokens.at(unk.get<size_t>()));
    m["fuse_unk"] = o.fuse_unk;
    m["byte_fallback"] = o.byte_fallback;
    return out;
  }
  out["normalizer"] =
      vocabulary.value("normalizer", std::string()) == "NFC" ? json{{"type", "NFC"}} : json();
  out["pre_tokenizer"] = pre_tokenizer_json(vocabulary.at("pre").get<std::string>());
  const json byte_level_post = {{"type", "ByteLevel"},
                                {"add_prefix_space", true},
                                {"trim_offsets", false},
                                {"use_regex", true}};
  out["post_processor"] =
      vocabulary_adds_bos(vocabulary)
          ? json{{"type", "Sequence"}, {"processors", {byte_level_post, bos_template(vocabulary)}}}
          : byte_level_post;
  out["decoder"] = byte_level(true);
  return out;
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
  // A model without "type" is read by tokenizers as the first kind its keys fit: BPE for a
  // vocab with merges.
  const std::string model_type = model.contains("type")     ? type_of(model)
                                 : model.contains("merges") ? "BPE"
                                                            : "(none given, and no merges)";
  FG_CHECK(model_type == "BPE",
           "{} model type '{}' is not supported (fitgrad reads BPE, byte-level or "
           "SentencePiece-style; Unigram, WordPiece and WordLevel are not implemented)",
           who, model_type);
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    FG_CHECK(
        !model.contains(key) || model.at(key).is_null() || model.at(key).get<std::string>().empty(),
        "{} model BPE with {} is not supported", who, key);
  FG_CHECK(!model.contains("dropout") || model.at("dropout").is_null() ||
               model.at("dropout").get<double>() == 0.0,
           "{} model BPE with dropout is not supported", who);
  const json normalizer = j.value("normalizer", json());
  const json decoder = j.value("decoder", json());
  // Note [tokenizer.json components]: the decoder tells byte-level BPE from SentencePiece's.
  const std::string decoder_type = type_of(decoder);
  FG_CHECK(decoder_type == "ByteLevel" || decoder_type == "Metaspace" ||
               decoder_type == "Sequence" || decoder_type == "Replace",
           "{} decoder {} is not supported (ByteLevel for byte-level BPE; Metaspace or "
           "Sequence[Replace(\"▁\" -> \" \"), ByteFallback, Fuse, Strip] for SentencePiece-style "
           "BPE)",
           who, decoder_type);
  const bool spm = decoder_type != "ByteLevel";
  SpmOptions spm_options;
  if (spm) {
    read_spm_pipeline(j, who, spm_options);
    spm_options.byte_fallback = flag(model, "byte_fallback", false);
    spm_options.fuse_unk = flag(model, "fuse_unk", false);
  } else {
    FG_CHECK(!flag(model, "byte_fallback", false),
             "{} model BPE with byte_fallback needs SentencePiece's decoder (Replace, "
             "ByteFallback, Fuse), not ByteLevel",
             who);
    FG_CHECK(normalizer.is_null() || type_of(normalizer) == "NFC",
             "{} normalizer {} is not supported (fitgrad reads none and NFC)", who,
             type_of(normalizer));
  }

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
  json rules = json::array();
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
      const int32_t type = flag(t, "special", false) ? 3 : 4;
      // Matching flags (Note [Added-token matching]); normalized=true counts for a
      // non-special token of a SentencePiece-style pipeline, whose normalizer changes text.
      const bool normalized = spm && type == 4 && flag(t, "normalized", true);
      if (flag(t, "lstrip", false) || flag(t, "rstrip", false) || flag(t, "single_word", false) ||
          normalized)
        rules.push_back({{"id", id},
                         {"lstrip", flag(t, "lstrip", false)},
                         {"rstrip", flag(t, "rstrip", false)},
                         {"single_word", flag(t, "single_word", false)},
                         {"normalized", normalized}});
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
  const std::optional<std::string> template_bos = post_processor_bos(j, who);
  if (template_bos) bos = id_of(*template_bos, "BOS");
  if (const auto text = role_text(config, "bos_token")) bos = id_of(*text, "bos_token");
  if (const auto text = role_text(config, "eos_token")) eos = id_of(*text, "eos_token");
  if (const auto text = role_text(config, "pad_token")) pad = id_of(*text, "pad_token");
  const bool add_bos = bos.has_value() && template_bos.has_value();  // Note [The bos a text ...]

  const auto id_json = [](std::optional<int32_t> id) { return id ? json(*id) : json(); };
  json out = {{"tokens", tokens},     {"merges", merges},
              {"token_types", types}, {"add_bos", add_bos},
              {"bos", id_json(bos)},  {"eos", id_json(eos)},
              {"pad", id_json(pad)},  {"ignore_merges", flag(model, "ignore_merges", false)},
              {"added_rules", rules}};
  if (spm) {
    std::optional<int32_t> unk;
    if (model.contains("unk_token") && model.at("unk_token").is_string()) {
      const auto it = vocab.find(model.at("unk_token").get<std::string>());
      FG_CHECK(it != vocab.end(), "{} model unk_token {} is not in the vocab", who,
               model.at("unk_token").dump());
      unk = it->get<int32_t>();
    }
    out.update({{"model", "spm"},
                {"name", "hf:spm"},
                {"pre", "spm"},
                {"unk", id_json(unk)},
                {"spm", spm_options_json(spm_options)}});
    return out;
  }
  const std::string pre = pre_name(j.value("pre_tokenizer", json()), who);
  out.update(
      {{"name", "hf:" + pre}, {"pre", pre}, {"normalizer", normalizer.is_null() ? "" : "NFC"}});
  return out;
}

bool vocabulary_adds_bos(const nlohmann::json& v) {
  if (!v.is_object() || !v.contains("bos") || v.at("bos").is_null()) return false;
  if (v.contains("add_bos") && v.at("add_bos").is_boolean()) return v.at("add_bos").get<bool>();
  return v.value("model", std::string()) == "spm" || v.value("pre", std::string()) == "llama-bpe";
}

std::vector<int32_t> text_ids(const Tokenizer& tok, const nlohmann::json& vocabulary,
                              std::string_view text, bool allow_special) {
  std::vector<int32_t> ids;
  if (vocabulary_adds_bos(vocabulary)) ids.push_back(*tok.bos());
  const std::vector<int32_t> body = tok.encode(text, allow_special);
  ids.insert(ids.end(), body.begin(), body.end());
  return ids;
}

}  // namespace fitgrad::data
