// Model specs and tokenizer ids (model_source.h).
#include "train/model_source.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "data/bpe_tokenizer.h"
#include "data/byte_tokenizer.h"
#include "data/gguf_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "io/bnb_4bit.h"
#include "io/gguf.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "io/whole_file.h"
#include "nn/gguf_model.h"
#include "nn/int8_linear.h"
#include "nn/llama_names.h"
#include "nn/nf4_linear.h"
#include "nn/peft_load.h"
#include "nn/text_config.h"
#include "tensor/error.h"
#include "train/checkpoint_dir.h"

namespace fitgrad::train {

namespace fs = std::filesystem;

namespace {

constexpr const char* kGgufPrefix = "gguf:";
constexpr const char* kHfPrefix = "hf:";

std::string hf_tokenizer_id(const std::string& path) {
  return kHfPrefix + fs::absolute(path).lexically_normal().string();
}

// The folder's tokenizer_config.json, or null without one.
nlohmann::json tokenizer_config_beside(const fs::path& tokenizer_json) {
  const fs::path path = tokenizer_json.parent_path() / "tokenizer_config.json";
  if (!fs::is_regular_file(path)) return nullptr;
  return io::read_json_file(path.string(), "[tokenizer " + path.string() + "]");
}

// Note [A folder's chat template]
// As transformers reads it: a chat_template.jinja file beside tokenizer.json, else
// tokenizer_config.json's "chat_template", a string or a list of {"name", "template"} of which
// the one named "default" is the template (a list without one has none). It travels in the
// vocabulary's "chat_template", as a GGUF file's tokenizer.chat_template does.
nlohmann::json chat_template_beside(const fs::path& tokenizer_json, const nlohmann::json& config) {
  const fs::path jinja = tokenizer_json.parent_path() / "chat_template.jinja";
  if (fs::is_regular_file(jinja))
    return io::read_whole_file("tokenizer", "chat template", jinja.string());
  if (!config.is_object() || !config.contains("chat_template")) return nullptr;
  const nlohmann::json& t = config.at("chat_template");
  if (t.is_string()) return t;
  FG_CHECK(t.is_array(),
           "[tokenizer {}] tokenizer_config.json's chat_template must be a string or a list of "
           "{{\"name\", \"template\"}}",
           tokenizer_json.string());
  for (const nlohmann::json& named : t)
    if (named.is_object() && named.value("name", std::string()) == "default" &&
        named.contains("template") && named.at("template").is_string())
      return named.at("template");
  return nullptr;
}

// The vocabulary of a Hugging Face tokenizer.json with its folder's tokenizer_config.json and
// chat template.
nlohmann::json hf_vocabulary(const std::string& path) {
  const nlohmann::json config = tokenizer_config_beside(path);
  nlohmann::json vocabulary = data::hf_tokenizer_vocabulary(path, config);
  const nlohmann::json chat_template = chat_template_beside(path, config);
  if (!chat_template.is_null()) vocabulary["chat_template"] = chat_template;
  return vocabulary;
}

// The tokenizer of a Hugging Face tokenizer.json (data/hf_tokenizer.h), its id and its
// vocabulary into `out`.
void take_hf_tokenizer(LoadedModel& out, const std::string& path) {
  out.tokenizer_vocabulary = hf_vocabulary(path);
  out.tokenizer =
      data::tokenizer_from_vocabulary(out.tokenizer_vocabulary, "[tokenizer " + path + "]");
  out.tokenizer_id = hf_tokenizer_id(path);
}

std::unique_ptr<data::Tokenizer> gguf_tokenizer(const io::GgufFile& file) {
  return data::tokenizer_from_gguf(file);
}

std::string gguf_tokenizer_id(const std::string& path) {
  return kGgufPrefix + fs::absolute(path).lexically_normal().string();
}

// The tokenizer of a GGUF file, its id and its vocabulary into `out`.
void take_gguf_tokenizer(LoadedModel& out, const io::GgufFile& file, const std::string& path) {
  out.tokenizer_vocabulary = data::gguf_vocabulary(file);
  out.tokenizer = data::tokenizer_from_vocabulary(out.tokenizer_vocabulary,
                                                  fmt::format("[gguf {}]", file.path()));
  out.tokenizer_id = gguf_tokenizer_id(path);
}

// Whether `name` is an int8 weight of a --weights_int8 checkpoint (Note [Int8 weights as
// parameters] in nn/int8_linear.h): u8 codes beside "<name>_scales" (f32) and "<name>_zeros"
// (u8) of as many groups, which divide its count.
bool is_int8_weight(const io::SafetensorsFile& file, const io::SafetensorsEntry& e,
                    int64_t* group_size) {
  if (e.dtype != DType::u8) return false;
  const io::SafetensorsEntry *scales = nullptr, *zeros = nullptr;
  for (const io::SafetensorsEntry& c : file.entries()) {
    if (c.name == e.name + "_scales") scales = &c;
    if (c.name == e.name + "_zeros") zeros = &c;
  }
  if (!scales || !zeros || scales->dtype != DType::f32 || zeros->dtype != DType::u8) return false;
  const int64_t groups = numel(scales->shape), n = numel(e.shape);
  if (groups == 0 || numel(zeros->shape) != groups || n % groups != 0) return false;
  *group_size = n / groups;
  return true;
}

// A safetensors file's tensors as a source; a bitsandbytes 4-bit weight (a `*-bnb-4bit`
// model, or `fitgrad quantize`'s output) reads as its dequantization in its original dtype
// in place of its packed bytes and companions, and an int8 weight of a --weights_int8
// checkpoint as its f32 dequantization in place of its codes, scales and zeros, so a dense
// model loads either, one weight dequantized at a time (Note [Streaming loads]).
nn::TensorSource safetensors_source(const std::string& path) {
  const auto file = std::make_shared<io::SafetensorsFile>(io::SafetensorsFile::open(path));
  std::set<std::string> companions, quantized;
  std::map<std::string, int64_t> int8;  // name -> group size
  for (const io::SafetensorsEntry& e : file->entries()) {
    int64_t group_size = 0;
    if (is_int8_weight(*file, e, &group_size)) {
      int8[e.name] = group_size;
      companions.insert({e.name + "_scales", e.name + "_zeros"});
    }
  }
  for (const io::SafetensorsEntry& e : file->entries())
    if (io::is_bnb_4bit(*file, e.name)) {
      quantized.insert(e.name);
      for (const char* c : {".absmax", ".quant_map", ".nested_absmax", ".nested_quant_map",
                            ".quant_state.bitsandbytes__nf4", ".quant_state.bitsandbytes__fp4"})
        companions.insert(e.name + c);
    }
  nn::TensorSource source;
  for (const io::SafetensorsEntry& e : file->entries()) {
    if (companions.count(e.name)) continue;
    if (int8.count(e.name)) {
      source.entries.push_back({e.name, e.shape, DType::f32});
      continue;
    }
    if (!quantized.count(e.name)) {
      source.entries.push_back({e.name, e.shape, e.dtype});
      continue;
    }
    DType dtype = DType::f32;
    const ops::FourBit q = io::read_bnb_4bit(*file, e.name, &dtype);
    source.entries.push_back({e.name, q.shape, dtype});
  }
  // Note [Dropping loaded pages]: a plain entry's bytes, once copied.
  source.release = [file, quantized, int8](const std::string& name) {
    if (!quantized.count(name) && !int8.count(name)) file->drop_pages(name);
  };
  source.read = [file, quantized, int8](const std::string& name) {
    if (const auto it = int8.find(name); it != int8.end()) {
      ops::Int8 q{it->second, file->tensor(name), file->tensor(name + "_scales"),
                  file->tensor(name + "_zeros")};
      return ops::dequantize_int8(q, DType::f32);
    }
    if (!quantized.count(name)) return file->tensor(name);
    DType dtype = DType::f32;
    const ops::FourBit q = io::read_bnb_4bit(*file, name, &dtype);
    return ops::dequantize_4bit(q, dtype);
  };
  return source;
}

// Note [Sharded model folders]
// A Hugging Face folder too large for one file holds model-0000k-of-0000n.safetensors shards
// and model.safetensors.index.json, whose "weight_map" names each tensor's shard. The
// shards are mapped, not read: each entry's bytes are read when the load asks for it, so a
// sharded load holds what a single-file one does (Note [Streaming loads]). Index and shards
// must agree exactly: a shard the index names that is missing, a tensor the index places in
// a shard that lacks it, and a shard tensor the index does not place there are errors that
// name the file and the tensor (transformers itself fails on the first two). A folder with
// model.safetensors as well reads that file, as transformers does.
nn::TensorSource sharded_source(const fs::path& index_path) {
  const std::string where = fmt::format("[model {}] {}", index_path.parent_path().string(),
                                        index_path.filename().string());
  const nlohmann::json index = io::read_json_file(index_path.string(), where + ":");
  FG_CHECK(index.is_object() && index.contains("weight_map") && index.at("weight_map").is_object(),
           "{} has no object 'weight_map' (a safetensors index maps each tensor name to its "
           "shard file)",
           where);
  std::map<std::string, std::vector<std::string>> by_shard;  // shard -> its tensors
  for (const auto& [name, shard] : index.at("weight_map").items()) {
    FG_CHECK(shard.is_string(), "{} weight_map['{}'] is not a file name", where, name);
    const std::string file = shard.get<std::string>();
    FG_CHECK(!file.empty() && file.find('/') == std::string::npos && file != "." && file != "..",
             "{} weight_map['{}'] is '{}', not a file name in the folder", where, name, file);
    by_shard[file].push_back(name);
  }
  FG_CHECK(!by_shard.empty(), "{} weight_map is empty", where);
  std::map<std::string, nn::TensorSource> shards;
  std::map<std::string, const nn::TensorSource*> owner;  // tensor -> its shard's source
  nn::TensorSource merged;
  for (const auto& [file, names] : by_shard) {
    const fs::path path = index_path.parent_path() / file;
    FG_CHECK(fs::is_regular_file(path),
             "{} names the shard {} (for '{}' and {} more), which is missing", where, path.string(),
             names.front(), names.size() - 1);
    nn::TensorSource& source = shards[file] = safetensors_source(path.string());
    std::set<std::string> listed(names.begin(), names.end());
    std::set<std::string> present;
    for (const nn::TensorSource::Entry& e : source.entries) {
      FG_CHECK(listed.count(e.name),
               "{} does not place '{}' in {}, which holds it: the index and the shard disagree",
               where, e.name, path.string());
      present.insert(e.name);
    }
    for (const std::string& name : names)
      FG_CHECK(present.count(name),
               "{} places '{}' in {}, which does not hold it: the index and the shard disagree",
               where, name, path.string());
    for (const nn::TensorSource::Entry& e : source.entries) {
      merged.entries.push_back(e);
      owner[e.name] = &source;
    }
  }
  auto keep = std::make_shared<std::map<std::string, nn::TensorSource>>(std::move(shards));
  merged.read = [keep, owner](const std::string& name) {
    const auto it = owner.find(name);
    FG_CHECK(it != owner.end(), "[model] no shard holds '{}'", name);
    return it->second->read(name);
  };
  merged.release = [keep, owner](const std::string& name) {
    if (const auto it = owner.find(name); it != owner.end()) it->second->release(name);
  };
  return merged;
}

// The text model's tensors of a multimodal folder's weights, under its own names (Note
// [Multimodal folders] in nn/text_config.cpp); the vision tower's are left out.
nn::TensorSource text_model_source(nn::TensorSource all) {
  nn::TensorSource text;
  std::map<std::string, std::string> stored;  // the text model's name -> the file's
  for (const nn::TensorSource::Entry& e : all.entries)
    if (const std::optional<std::string> name = nn::text_model_name(e.name)) {
      text.entries.push_back(e);
      text.entries.back().name = *name;
      stored[*name] = e.name;
    }
  auto names = std::make_shared<const std::map<std::string, std::string>>(std::move(stored));
  text.read = [names, read = all.read](const std::string& name) {
    const auto it = names->find(name);
    FG_CHECK(it != names->end(), "[model] the text model has no tensor '{}'", name);
    return read(it->second);
  };
  if (all.release)
    text.release = [names, release = all.release](const std::string& name) {
      if (const auto it = names->find(name); it != names->end()) release(it->second);
    };
  return text;
}

// Note [Stop tokens]
// A folder's generation_config.json names the tokens generation stops at: eos_token_id, an
// id or a list of them (Llama 3.1 Instruct stops at <|end_of_text|>, <|eom_id|> and
// <|eot_id|>), as transformers' generate() reads it; without that file, config.json's
// eos_token_id, as transformers falls back to. generate stops at any of them. Each must be
// an id of the model's vocabulary; anything else is an error naming the file and the key.
// The ids of `j`'s eos_token_id (one or a list; `path` names the file in errors); none when
// it has no such key.
std::vector<int32_t> eos_ids(const nlohmann::json& j, const fs::path& path, int64_t vocab) {
  if (!j.is_object() || !j.contains("eos_token_id") || j.at("eos_token_id").is_null()) return {};
  const nlohmann::json& v = j.at("eos_token_id");
  std::vector<int32_t> ids;
  for (const nlohmann::json& id : v.is_array() ? v : nlohmann::json::array({v})) {
    FG_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < vocab,
             "[model {}] eos_token_id {} is not an id of the model's vocabulary of {}",
             path.string(), id.dump(), vocab);
    ids.push_back(id.get<int32_t>());
  }
  return ids;
}

// generation_config.json's stop ids when the folder has one, else config.json's (`config`,
// already read).
std::vector<int32_t> stop_ids_of(const fs::path& dir, const nlohmann::json& config, int64_t vocab) {
  const fs::path generation = dir / "generation_config.json";
  if (fs::is_regular_file(generation))
    return eos_ids(io::read_json_file(generation.string(), "[model " + generation.string() + "]"),
                   generation, vocab);
  return eos_ids(config, dir / "config.json", vocab);
}

nn::BuildOptions without_init(nn::BuildOptions options) {
  options.initialize = false;
  return options;
}

// Module::load (strict), through PEFT's names when the build adapted layers
// (nn/peft_load.h), with the spec and the weights file named in any error.
void load_weights(nn::CausalLM& model, const nn::TensorSource& source, const std::string& where,
                  const std::string& file) {
  try {
    nn::load_into_adapted(model, source);
  } catch (const Error& e) {
    throw Error(
        fmt::format("{} the weights in {} do not fit the model: {}", where, file, e.what()));
  }
}

// Dense parameters plus the weights held in 4 bits (which are no parameters).
std::string params_text(const nn::CausalLM& m) {
  int64_t four_bit = 0;
  for (const auto& [path, module] : m.named_modules())
    if (const auto* q = dynamic_cast<const nn::FourBitWeight*>(module))
      four_bit += q->quantized().numel();
  const double all = double(m.num_parameters() + four_bit) / 1e6;
  if (four_bit == 0) return fmt::format("{:.1f}M parameters", all);
  return fmt::format("{:.1f}M parameters, {:.1f}M of them in 4 bits", all, double(four_bit) / 1e6);
}

}  // namespace

nn::TensorSource read_weights_file(const std::string& path, DType dtype, const std::string& flag) {
  std::error_code ec;
  FG_CHECK(!fs::is_directory(path, ec),
           "[model] {} '{}' is a directory; {} takes a .safetensors or .gguf file (a "
           "checkpoint directory is a --model)",
           flag, path, flag);
  FG_CHECK(fs::exists(path, ec), "[model] {} file '{}' does not exist", flag, path);
  FG_CHECK(fs::is_regular_file(path, ec), "[model] {} '{}' is not a regular file", flag, path);
  if (path.ends_with(".safetensors")) return safetensors_source(path);
  FG_CHECK(path.ends_with(".gguf"), "[model] {} '{}' must be a .safetensors or .gguf file", flag,
           path);
  const auto file = std::make_shared<io::GgufFile>(io::GgufFile::open(path));
  nn::TensorSource source = nn::llama_gguf_source(*file, dtype);
  source.read = [file, read = std::move(source.read)](const std::string& name) {
    return read(name);  // the file stays mapped while the source lives
  };
  return source;
}

nn::TensorSource folder_weights(const std::string& dir, std::string* file) {
  const fs::path single = fs::path(dir) / "model.safetensors";
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  const fs::path config = fs::path(dir) / "config.json";
  for (const fs::path& p : {single, index}) {
    std::error_code ec;
    FG_CHECK(!fs::exists(p, ec) || fs::is_regular_file(p, ec),
             "[model {}] {} is {}: a folder's weights are the file model.safetensors, or shards "
             "named by the file model.safetensors.index.json",
             dir, p.filename().string(),
             fs::is_directory(p, ec) ? "a directory" : "not a regular file");
  }
  nn::TensorSource source;
  if (fs::is_regular_file(single)) {
    if (file) *file = single.string();
    source = safetensors_source(single.string());
  } else {
    const fs::path adapter = fs::path(dir) / "adapter_config.json";
    if (fs::is_regular_file(adapter)) {
      const auto j = io::read_json_file(adapter.string(), "[model " + dir + "]");
      const std::string base = j.is_object() && j.contains("base_model_name_or_path") &&
                                       j["base_model_name_or_path"].is_string()
                                   ? j["base_model_name_or_path"].get<std::string>()
                                   : std::string("<its base model>");
      throw Error(fmt::format(
          "[model {}] is a LoRA adapter (adapter_config.json), not a model: give its base, "
          "--model {}, with --adapter {} (generate, eval), or merge the two with `fitgrad export "
          "--base {} --merge {} -o <folder>`",
          dir, base, dir, base, dir));
    }
    FG_CHECK(fs::is_regular_file(index),
             "[model {}] the directory has neither model.safetensors nor "
             "model.safetensors.index.json (its shards' index)",
             dir);
    if (file) *file = index.string();
    source = sharded_source(index);
  }
  if (fs::is_regular_file(config) && nn::is_multimodal_config(io::read_json_file(
                                         config.string(), "[config " + config.string() + "]")))
    return text_model_source(std::move(source));
  return source;
}

std::unique_ptr<data::Tokenizer> default_tokenizer(const nn::ModelConfig& cfg,
                                                   std::string* tokenizer_id) {
  std::string id;
  if (cfg.vocab_size == 256) {
    id = "byte";
  } else if (cfg.vocab_size == 50257) {
    id = "gpt2";
  } else {
    throw Error(
        fmt::format("[model {}] no tokenizer for a vocabulary of {} tokens (known without a stored "
                    "tokenizer: 256 byte-level, 50257 GPT-2); use a model folder with "
                    "tokenizer.json, a checkpoint with fitgrad_tokenizer.json or a GGUF file",
                    cfg.name, cfg.vocab_size));
  }
  if (tokenizer_id) *tokenizer_id = id;
  return make_tokenizer(id);
}

std::unique_ptr<data::Tokenizer> make_tokenizer(const std::string& tokenizer_id) {
  if (tokenizer_id == "byte") return std::make_unique<data::ByteTokenizer>();
  if (tokenizer_id == "gpt2")
    return std::make_unique<data::BpeTokenizer>(data::BpeTokenizer::gpt2(data::gpt2_asset_dir()));
  if (tokenizer_id.starts_with(kGgufPrefix))
    return gguf_tokenizer(io::GgufFile::open(tokenizer_id.substr(std::string(kGgufPrefix).size())));
  if (tokenizer_id.starts_with(kHfPrefix)) {
    const std::string path = tokenizer_id.substr(std::string(kHfPrefix).size());
    return data::tokenizer_from_vocabulary(hf_vocabulary(path), "[tokenizer " + path + "]");
  }
  throw Error(
      fmt::format("[tokenizer] unknown tokenizer id '{}' (byte, gpt2, gguf:<path> or hf:<path>)",
                  tokenizer_id));
}

std::unique_ptr<data::Tokenizer> TokenizerSpec::make() const {
  if (vocabulary.is_null()) return make_tokenizer(id);
  return data::tokenizer_from_vocabulary(vocabulary, fmt::format("[tokenizer {}]", id));
}

void save_tokenizer_spec(const std::string& dir, const std::string& tokenizer_id,
                         const nlohmann::json& vocabulary) {
  nlohmann::json j;
  if (tokenizer_id.starts_with(kGgufPrefix) || tokenizer_id.starts_with(kHfPrefix)) {
    const bool gguf = tokenizer_id.starts_with(kGgufPrefix);
    j["kind"] = gguf ? "gguf" : "hf";
    j["path"] = tokenizer_id.substr(std::string(gguf ? kGgufPrefix : kHfPrefix).size());
    if (!vocabulary.is_null()) j["vocabulary"] = vocabulary;
  } else {
    FG_CHECK(tokenizer_id == "byte" || tokenizer_id == "gpt2",
             "[tokenizer] unknown tokenizer id '{}' (byte, gpt2 or gguf:<path>)", tokenizer_id);
    j["kind"] = tokenizer_id;
  }
  const std::string path = (fs::path(dir) / "fitgrad_tokenizer.json").string();
  std::ofstream out(path);
  out << io::json_text(j, 2) << "\n";
  FG_CHECK(out.good(), "[tokenizer {}] cannot write the file", path);
}

TokenizerSpec load_tokenizer_spec(const std::string& dir) {
  const std::string path = (fs::path(dir) / "fitgrad_tokenizer.json").string();
  const nlohmann::json j = io::read_json_file(path, "[tokenizer " + path + "]");
  FG_CHECK(j.is_object() && j.contains("kind") && j.at("kind").is_string(),
           "[tokenizer {}] not a fitgrad tokenizer spec (no string key 'kind'; Hugging Face "
           "tokenizer files are not read)",
           path);
  const std::string kind = j.at("kind").get<std::string>();
  if (kind == "byte" || kind == "gpt2") return {kind, nullptr};
  FG_CHECK(kind == "gguf" || kind == "hf",
           "[tokenizer {}] unknown kind '{}' (byte, gpt2, gguf or hf)", path, kind);
  FG_CHECK(j.contains("path") && j.at("path").is_string(),
           "[tokenizer {}] kind {} needs a string key 'path'", path, kind);
  return {(kind == "gguf" ? kGgufPrefix : kHfPrefix) + j.at("path").get<std::string>(),
          j.contains("vocabulary") ? j.at("vocabulary") : nlohmann::json()};
}

LoadedModel load_model(const std::string& spec, const std::string& init,
                       const nn::BuildOptions& options, bool skip_verification,
                       const std::string& what) {
  LoadedModel out;
  const std::string where = "[model " + spec + "]";
  const bool is_dir = fs::is_directory(spec);
  const bool is_file = fs::is_regular_file(spec);
  std::string weights;  // "random", or the file the weights came from
  if (spec.ends_with(".gguf") && is_file) {
    const io::GgufFile file = io::GgufFile::open(spec);
    if (init.empty()) {
      out.model = nn::load_gguf_model(file, options);
      weights = spec;
    } else {
      out.model = nn::build_model(nn::config_from_gguf(file), without_init(options));
    }
    take_gguf_tokenizer(out, file, spec);
  } else if (is_dir) {
    const fs::path dir(spec);
    verify_before_reading(spec, what, skip_verification || options.device.type == DeviceType::meta);
    FG_CHECK(fs::is_regular_file(dir / "config.json"),
             "{} the directory has no config.json (a checkpoint directory holds config.json, "
             "model.safetensors and fitgrad_tokenizer.json)",
             where);
    const std::string config_path = (dir / "config.json").string();
    const nlohmann::json config_json =
        io::read_json_file(config_path, "[config " + config_path + "]");
    const nn::ModelConfig cfg = nn::config_from_json(config_json, config_path);
    out.model = nn::build_model(cfg, without_init(options));
    std::error_code ec;  // one that is no file is refused by folder_weights
    const bool has_weights = fs::exists(dir / "model.safetensors", ec) ||
                             fs::exists(dir / "model.safetensors.index.json", ec);
    if (init.empty() && options.device.type == DeviceType::meta) {
      // A plan or dry run on meta holds no values: a folder needs only its config.json. With
      // weights there, it loads their headers' shapes as the run loads the bytes (an NF4
      // base re-quantizes as it loads), so that both allocate alike.
      weights = "not read (on meta, config.json is all a plan needs)";
      if (has_weights) {
        std::string file;
        load_weights(*out.model, folder_weights(spec, &file).meta_views(), where, file);
        weights = fmt::format("{}: its shapes (on meta no values are read)", file);
      }
    } else if (init.empty()) {
      std::string file;
      load_weights(*out.model, folder_weights(spec, &file), where, file);
      weights = file;
    }
    if (fs::is_regular_file(dir / "fitgrad_tokenizer.json")) {
      const TokenizerSpec ts = load_tokenizer_spec(spec);
      out.tokenizer_id = ts.id;
      out.tokenizer_vocabulary = ts.vocabulary;
      out.tokenizer = ts.make();
    } else if (fs::is_regular_file(dir / "tokenizer.json")) {
      take_hf_tokenizer(out, (dir / "tokenizer.json").string());
    }
    out.stop_ids = stop_ids_of(dir, config_json, cfg.vocab_size);  // Note [Stop tokens]
  } else if (spec.ends_with(".json") && is_file) {
    const nn::ModelConfig cfg = nn::load_config_json(spec);
    out.model = nn::build_model(cfg, init.empty() ? options : without_init(options));
    // The tokenizer of the folder the config.json lies in, when it has one.
    const fs::path beside = fs::path(spec).parent_path() / "tokenizer.json";
    if (fs::is_regular_file(beside)) take_hf_tokenizer(out, beside.string());
  } else if (is_file) {
    // Note [Model specs]: an existing file that is none of them says what is missing.
    const fs::path beside = fs::path(spec).parent_path() / "config.json";
    FG_CHECK(!spec.ends_with(".safetensors"),
             "{} holds weights only: a model also needs its config.json. {}", where,
             fs::is_regular_file(beside)
                 ? fmt::format("Give --model {} --init {}", beside.string(), spec)
                 : fmt::format("There is none beside it ({}): give --model a preset or a "
                               "config.json, and --init this file",
                               beside.string()));
    throw Error(fmt::format(
        "{} is a file, but neither a config.json (.json) nor a .gguf file (a model is a preset, "
        "a config.json, a checkpoint directory or a .gguf file)",
        where));
  } else {
    std::error_code ec;
    FG_CHECK(!fs::exists(spec, ec) || fs::is_regular_file(spec, ec),
             "{} is not a regular file or a directory (a model is a preset, a config.json, a "
             "checkpoint directory or a .gguf file)",
             where);
    const bool looks_like_path = spec.find('/') != std::string::npos || spec.ends_with(".json") ||
                                 spec.ends_with(".gguf") || spec.ends_with(".safetensors");
    FG_CHECK(!looks_like_path,
             "{} no such file or directory (a model is a preset, a config.json, a checkpoint "
             "directory or a .gguf file)",
             where);
    const nn::ModelConfig cfg = nn::preset(spec);
    out.model = nn::build_model(cfg, init.empty() ? options : without_init(options));
  }
  if (!init.empty()) {
    load_weights(*out.model, read_weights_file(init, options.dtype, "--init"), where, init);
    weights = init;
    if (!out.tokenizer && init.ends_with(".gguf")) {
      take_gguf_tokenizer(out, io::GgufFile::open(init), init);
    }
  }
  const int64_t vocab = out.model->config().vocab_size;
  if (!out.tokenizer && options.device.type == DeviceType::meta && vocab != 256 && vocab != 50257)
    out.tokenizer_id = "none";  // Note [No tokenizer on meta]
  else if (!out.tokenizer)
    out.tokenizer = default_tokenizer(out.model->config(), &out.tokenizer_id);
  FG_CHECK(!out.tokenizer || out.tokenizer->vocab_size() <= vocab,
           "{} the tokenizer '{}' has {} tokens, more than the model's vocabulary of {}", where,
           out.tokenizer_id, out.tokenizer ? out.tokenizer->vocab_size() : 0, vocab);
  out.description = fmt::format(
      "{} ({}, {}), weights: {}, tokenizer: {}", out.model->config().name,
      out.model->config().model_type, params_text(*out.model),
      weights.empty() ? fmt::format("random (seed {})", options.seed) : weights, out.tokenizer_id);
  return out;
}

}  // namespace fitgrad::train
