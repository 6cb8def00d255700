// `fitgrad generate` as a library (apps/generate.h): decoded text streams without cutting
// UTF-8 characters; greedy text with the KV cache equals the text of full re-forwards;
// a seed fixes sampled text; the stats count tokens; a PEFT adapter decodes as its merged
// model, and a 4-bit base in less memory; and bad options fail with one clear error before
// any model is loaded.
#include "apps/generate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/export.h"
#include "data/chat_template.h"
#include "data/utf8.h"
#include "tests/golden/golden_file.h"
#include "tests/tensor/ops/op_harness.h"
#include "train/model_source.h"

namespace fitgrad::apps {

using train::GenerateStats;
using train::Utf8Stream;
namespace {

using fitgrad::testing::expect_error;

TEST(Utf8Stream, WritesOnlyCompleteCharactersUntilFinished) {
  const std::string text = "h\xC3\xA9llo \xE2\x82\xAC \xF0\x9D\x84\x9E!";  // é, €, 𝄞
  std::ostringstream out;
  Utf8Stream stream(out);
  for (size_t i = 0; i < text.size(); ++i) {
    stream.write(text.substr(i, 1));
    EXPECT_TRUE(data::is_valid_utf8(out.str())) << "after byte " << i;
    EXPECT_EQ(out.str(), text.substr(0, out.str().size()));
    EXPECT_GE(out.str().size() + 3, i + 1);  // at most an unfinished character is held
  }
  stream.finish();
  EXPECT_EQ(out.str(), text);
}

TEST(Utf8Stream, PassesInvalidBytesThrough) {
  std::ostringstream out;
  Utf8Stream stream(out);
  stream.write("a\xE2");  // a lead byte: held
  EXPECT_EQ(out.str(), "a");
  stream.write("b");  // it cannot continue: written with what follows
  EXPECT_EQ(out.str(),
            "a\xE2"
            "b");
  stream.write("\x80\x80");  // stray continuation bytes: written
  EXPECT_EQ(out.str(),
            "a\xE2"
            "b\x80\x80");
  stream.write("\xF0\x9D");
  stream.finish();  // an unfinished character at the end is written as it is
  EXPECT_EQ(out.str(),
            "a\xE2"
            "b\x80\x80\xF0\x9D");
}

GenerateOptions tiny(const char* model) {
  GenerateOptions o;
  o.model = model;
  o.prompt = "Once upon a time";
  o.max_new_tokens = 24;
  return o;
}

TEST(Generate, CachedGreedyTextEqualsFullReforwardText) {
  for (const char* model : {"gpt2-tiny", "llama-tiny"}) {
    GenerateOptions o = tiny(model);
    o.sampling.temperature = 0;
    std::ostringstream cached, full;
    const GenerateStats s = generate(o, cached);
    o.no_kv_cache = true;
    generate(o, full);
    EXPECT_EQ(cached.str(), full.str()) << model;
    EXPECT_EQ(s.prompt_tokens, 16);  // bytes of the prompt
    EXPECT_EQ(s.new_tokens, 24);
    EXPECT_EQ(s.stop_reason, "max_new_tokens");
    EXPECT_GT(s.peak_bytes, 0);
    EXPECT_NE(stats_line(s).find("prompt tokens: 16, new tokens: 24"), std::string::npos);
  }
}

// Note [Stop tokens]: a folder's generation_config.json eos_token_id list ends generation at
// any of its ids (the tiny Llama 3.1-style folder of tests/golden, its byte tokenizer: a
// token is a byte); without the file, config.json's eos_token_id; an id outside the
// vocabulary is an error naming the file.
TEST(Generate, StopsAtAnyIdOfGenerationConfig) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("generate_stop_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::copy(std::string(FITGRAD_GOLDEN_DIR) + "/hf_llama31_tiny/model", dir);
  const auto write_generation_config = [&](const std::string& eos) {
    std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": )" << eos << "}";
  };
  write_generation_config("null");
  GenerateOptions o;
  o.model = dir.string();
  o.prompt = "Once upon";
  o.max_new_tokens = 12;
  o.sampling.temperature = 0;
  std::ostringstream free_run;
  ASSERT_EQ(generate(o, free_run).new_tokens, 12);
  const std::string bytes = free_run.str();
  ASSERT_EQ(bytes.size(), 12u);
  const int third = uint8_t(bytes[2]);
  int unused = 0;  // an id the free run never produced
  while (bytes.find(char(unused)) != std::string::npos) ++unused;
  write_generation_config("[" + std::to_string(unused) + ", " + std::to_string(third) + "]");
  std::ostringstream stopped;
  const GenerateStats s = generate(o, stopped);
  EXPECT_EQ(s.stop_reason, "eos");
  EXPECT_EQ(stopped.str(), bytes.substr(0, bytes.find(char(third))));
  fs::remove(dir / "generation_config.json");  // config.json's eos_token_id, 2, then
  EXPECT_EQ(train::load_model(dir.string(), "", {}).stop_ids, std::vector<int32_t>{2});
  write_generation_config("[3, 256]");
  std::ostringstream bad;
  expect_error([&] { generate(o, bad); },
               "[model " + (dir / "generation_config.json").string() + "]",
               "eos_token_id 256 is not an id of the model's vocabulary of 256");
  fs::remove_all(dir);
}

TEST(Generate, TheSeedFixesTheSampledText) {
  auto run = [](uint64_t seed) {
    GenerateOptions o = tiny("llama-tiny");
    o.seed = seed;  // also the random weights' seed
    o.sampling = {.temperature = 1.0, .top_k = 50, .top_p = 0.9};
    std::ostringstream out;
    generate(o, out);
    return out.str();
  };
  EXPECT_EQ(run(3), run(3));
  EXPECT_NE(run(3), run(4));
}

TEST(Generate, ReadsThePromptFromAFile) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fitgrad_prompt_" + std::to_string(::getpid()) + ".txt");
  std::ofstream(path) << "Once upon a time";
  GenerateOptions a = tiny("gpt2-tiny"), b = tiny("gpt2-tiny");
  a.sampling.temperature = b.sampling.temperature = 0;
  b.prompt.clear();
  b.prompt_file = path.string();
  std::ostringstream out_a, out_b;
  generate(a, out_a);
  generate(b, out_b);
  EXPECT_EQ(out_a.str(), out_b.str());
  std::filesystem::remove(path);
}

// Note [Generating from a 4-bit base]: PEFT's adapter over transformers' tiny Llama
// (tests/golden/peft_tiny) decodes the text of the model `fitgrad export --merge` makes of
// them; with --quantize nf4 the same model decodes from a 4-bit base in less memory.
TEST(Generate, AnAdapterDecodesAsItsMergedModelAndNf4TakesLessMemory) {
  const std::string base = testing::golden_path("peft_tiny/base");
  GenerateOptions o = tiny(base.c_str());
  o.sampling.temperature = 0;
  o.adapter = testing::golden_path("peft_tiny/adapter");
  std::ostringstream adapted, merged, quantized, dense;
  generate(o, adapted);

  const std::string merged_file = ::testing::TempDir() + "fitgrad_generate_merged_" +
                                  std::to_string(::getpid()) + ".safetensors";
  std::ostringstream log;
  export_merged({o.adapter, base + "/model.safetensors", merged_file, "f32"}, log);
  GenerateOptions m = tiny(base.c_str());
  m.sampling.temperature = 0;
  m.init = merged_file;
  generate(m, merged);
  EXPECT_EQ(adapted.str(), merged.str());
  std::filesystem::remove(merged_file);
  std::ostringstream plain;  // the adapter changes the text
  GenerateOptions b = tiny(base.c_str());
  b.sampling.temperature = 0;
  generate(b, plain);
  EXPECT_NE(plain.str(), adapted.str());

  GenerateOptions q = tiny(base.c_str());
  const GenerateStats f32 = generate(q, dense);
  q.quantize = "nf4";
  q.double_quant = true;
  const GenerateStats nf4 = generate(q, quantized);
  EXPECT_EQ(nf4.new_tokens, 24);
  EXPECT_LT(nf4.peak_bytes, f32.peak_bytes);
  q.quantize = "int8";
  expect_error([&] { generate(q, quantized); }, "[generate]", "--quantize must be nf4");
}

// --messages renders the conversation through the chat template (here SmolLM2's, given with
// --chat_template, over the byte-level golden folder) with the generation prompt: the text is
// what generating after jinja2's own rendering of it gives (tests/golden/chat_templates/).
TEST(Generate, AConversationIsPromptedThroughTheChatTemplate) {
  namespace fs = std::filesystem;
  const fs::path golden = fs::path(FITGRAD_GOLDEN_DIR) / "chat_templates";
  const nlohmann::json expected = nlohmann::json::parse(std::ifstream(golden / "expected.json"));
  std::string rendered;
  for (const nlohmann::json& c : expected.at("cases"))
    if (c.at("template") == "smollm2" && c.at("conversation") == "basic" &&
        c.at("add_generation_prompt") == true)
      rendered = c.at("text");
  ASSERT_FALSE(rendered.empty());
  const fs::path messages =
      fs::temp_directory_path() / ("generate_messages_" + std::to_string(::getpid()) + ".json");
  std::ofstream(messages) << expected.at("conversations").at("basic").dump();

  GenerateOptions o;
  o.model = std::string(FITGRAD_GOLDEN_DIR) + "/hf_llama31_tiny/model";
  o.max_new_tokens = 10;
  o.sampling.temperature = 0;
  o.messages_file = messages.string();
  std::ostringstream missing;
  expect_error([&] { generate(o, missing); }, "[generate]",
               "has no chat template (its tokenizer_config.json, chat_template.jinja or GGUF "
               "tokenizer.chat_template would carry one); give one with --chat_template FILE");
  o.chat_template = (golden / "smollm2.jinja").string();
  std::ostringstream chat_text, prompt_text;
  const GenerateStats chat_stats = generate(o, chat_text);
  GenerateOptions plain = o;
  plain.messages_file.clear();
  plain.prompt = rendered;
  const GenerateStats prompt_stats = generate(plain, prompt_text);
  EXPECT_EQ(chat_stats.prompt_tokens, int64_t(rendered.size()));  // one byte, one token
  EXPECT_EQ(chat_stats.prompt_tokens, prompt_stats.prompt_tokens);
  EXPECT_EQ(chat_text.str(), prompt_text.str());

  // --chat: each line a user turn, each reply the assistant's: the first reply is what
  // --messages gives for the first turn, the second what the template's rendering of the
  // conversation so far, the first reply included, prompts.
  std::ofstream(messages, std::ios::trunc) << R"([{"role": "user", "content": "Hi there"}])";
  std::ostringstream first;
  generate(o, first);
  nlohmann::ordered_json so_far =
      nlohmann::ordered_json::array({{{"role", "user"}, {"content", "Hi there"}},
                                     {{"role", "assistant"}, {"content", first.str()}},
                                     {{"role", "user"}, {"content", "And then?"}}});
  const data::ChatTemplate smollm2 = data::ChatTemplate::parse(
      (std::stringstream() << std::ifstream(golden / "smollm2.jinja").rdbuf()).str(), "smollm2");
  plain.prompt =
      smollm2.render(data::chat_context(so_far, true, {{"bos_token", ""}, {"eos_token", ""}})).text;
  std::ostringstream second;
  generate(plain, second);
  GenerateOptions interactive = o;
  interactive.messages_file.clear();
  std::istringstream in("Hi there\nAnd then?\n\n");
  std::ostringstream out, log;
  EXPECT_EQ(chat(interactive, in, out, log), 2);
  EXPECT_EQ(out.str(), first.str() + "\n" + second.str() + "\n");
  fs::remove(messages);
}

TEST(Generate, BadOptionsGiveOneClearError) {
  auto with = [](auto edit) {
    GenerateOptions o = tiny("gpt2-tiny");
    edit(o);
    std::ostringstream out;
    generate(o, out);
  };
  expect_error([&] { with([](GenerateOptions& o) { o.prompt.clear(); }); }, "[generate]",
               "--prompt TEXT, --prompt_file PATH or --messages FILE");
  expect_error([&] { with([](GenerateOptions& o) { o.prompt_file = "p.txt"; }); }, "[generate]",
               "not both");
  expect_error(
      [&] {
        with([](GenerateOptions& o) {
          o.prompt.clear();
          o.prompt_file = "/no/such/prompt.txt";
        });
      },
      "[generate]", "cannot open the prompt file '/no/such/prompt.txt'");
  expect_error([&] { with([](GenerateOptions& o) { o.sampling.top_p = 1.5; }); }, "[sampling]",
               "top_p must be in (0, 1]");
  expect_error([&] { with([](GenerateOptions& o) { o.sampling.temperature = -1; }); }, "[sampling]",
               "temperature must be >= 0");
  expect_error([&] { with([](GenerateOptions& o) { o.max_new_tokens = 0; }); }, "[generate]",
               "--max_new_tokens must be positive and at most 2^31");
  expect_error([&] { with([](GenerateOptions& o) { o.max_new_tokens = 60; }); }, "[generate]",
               "16 prompt tokens + 60 new tokens do not fit the model's context of 64");
  expect_error([&] { with([](GenerateOptions& o) { o.dtype = "f16"; }); }, "[generate]",
               "--dtype must be f32 or bf16");
  expect_error([&] { with([](GenerateOptions& o) { o.model = "gpt-7"; }); }, "[config]",
               "unknown preset 'gpt-7'");
}

}  // namespace
}  // namespace fitgrad::apps
