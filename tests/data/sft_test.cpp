// Instruction and chat examples to token ids and loss masks (data/sft_encode.h). Golden:
// every fixture record of tests/golden/sft/records (each format, multi-turn, system prompts,
// non-ASCII, a tool call, alpaca with and without input) through six (tokenizer, template)
// pairs and the three train_on modes gives the ids and masks that Python's jinja2 in
// transformers' environment and `tokenizers` give (tests/golden/gen_sft_golden.py), or fails
// where Python does: the template's raise_exception, or a prefix rendering that is not a
// prefix. Then by hand, on a byte tokenizer whose masks can be written down: each train_on
// mode, max_length, bos and eos, template variables, and the encoder's errors. The records
// themselves: tests/data/sft_records_test.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "data/byte_tokenizer.h"
#include "data/gguf_tokenizer.h"
#include "data/hf_tokenizer.h"
#include "data/sft_encode.h"
#include "data/sft_records.h"
#include "tensor/error.h"

namespace fitgrad::data {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using ::testing::HasSubstr;

const std::string kGolden = std::string(FITGRAD_GOLDEN_DIR);
const std::string kRecords = kGolden + "/sft/records";

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << path;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string flags(const std::vector<uint8_t>& trained) {
  std::string s;
  for (const uint8_t t : trained) s += char('0' + t);
  return s;
}

// ---- golden ----

std::unique_ptr<Tokenizer> hf_tokenizer(const std::string& style) {
  const std::string dir = kGolden + "/hf_tokenizers/" + style;
  const std::string config = dir + "/tokenizer_config.json";
  const nlohmann::json vocab = hf_tokenizer_vocabulary(
      dir + "/tokenizer.json",
      fs::exists(config) ? nlohmann::json::parse(read_text(config)) : nlohmann::json());
  return tokenizer_from_vocabulary(vocab, "[test " + style + "]");
}

TEST(SftGolden, EveryCaseGivesPythonsIdsAndMasks) {
  const json expected = json::parse(read_text(kGolden + "/sft/expected.json"));
  std::map<std::string, std::unique_ptr<Tokenizer>> tokenizers;
  std::map<std::string, ChatTemplate> templates;
  std::map<std::string, std::vector<SftExample>> files;
  int checked = 0, passed = 0;
  for (const json& c : expected.at("cases")) {
    const std::string style = c.at("tokenizer"), name = c.at("template"), file = c.at("file");
    const auto index = c.at("index").get<size_t>();
    SCOPED_TRACE(style + " + " + name + ": " + file + " [" + std::to_string(index) + "]");
    if (!tokenizers.contains(style)) tokenizers[style] = hf_tokenizer(style);
    if (!templates.contains(name))
      templates.emplace(name,
                        ChatTemplate::parse(read_text(kGolden + "/chat_templates/" + name), name));
    if (!files.contains(file)) files[file] = read_sft_examples(kRecords + "/" + file);
    ASSERT_LT(index, files[file].size());
    const SftExample& ex = files[file][index];
    EXPECT_EQ(sft_format_name(ex.format), c.at("format").get<std::string>());
    for (const TrainOn mode : {TrainOn::assistant, TrainOn::all, TrainOn::last}) {
      SCOPED_TRACE(std::string(train_on_name(mode)));
      ++checked;
      const SftEncoder encoder(*tokenizers[style], &templates.at(name), style, {.train_on = mode});
      const json& want = c.contains("error") ? c : c.at(std::string(train_on_name(mode)));
      bool ok = true;
      if (want.is_string()) {
        const SftTokens got = encoder.encode(ex);
        ok = got.ids == c.at("ids").get<std::vector<int32_t>>() &&
             flags(got.trained) == want.get<std::string>() &&
             got.num_trained == std::count(want.get_ref<const std::string&>().begin(),
                                           want.get_ref<const std::string&>().end(), '1');
        EXPECT_EQ(got.ids, c.at("ids").get<std::vector<int32_t>>());
        EXPECT_EQ(flags(got.trained), want.get<std::string>());
      } else if (want.at("error") == "raised") {
        try {
          encoder.encode(ex);
          ok = false;
        } catch (const ChatTemplateRaised& e) {
          ok = e.message() == want.at("message").get<std::string>();
          EXPECT_EQ(e.message(), want.at("message").get<std::string>());
          EXPECT_THAT(e.what(), HasSubstr("[sft " + ex.where + "] rendering messages[:"));
        }
      } else {  // "prefix", or "render": another failure of the template
        const bool prefix = want.at("error") == "prefix";
        try {
          encoder.encode(ex);
          ok = false;
        } catch (const Error& e) {
          ok = !prefix || std::string(e.what()).find("not a prefix") != std::string::npos;
          EXPECT_THAT(e.what(), HasSubstr("[sft " + ex.where + "]"));
          if (prefix) {
            EXPECT_THAT(e.what(), HasSubstr("--train_on all"));
          }
        }
      }
      EXPECT_TRUE(ok);
      passed += ok ? 1 : 0;
    }
  }
  EXPECT_EQ(checked, 3 * int(expected.at("cases").size()));
  EXPECT_EQ(passed, checked);
  std::printf("[sft golden] %d of %d (case, train_on) checks pass\n", passed, checked);
}

// ---- encoding, by hand ----

// A ChatML template on a byte tokenizer: every token is a byte or a marker, so the masks can
// be written down.
constexpr const char* kChatMl =
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

SftExample conversation(const std::string& messages) {
  SftExample ex;
  ex.where = "test.jsonl line 1";
  ex.format = SftFormat::messages;
  ex.messages = json::parse(messages);
  return ex;
}

// The mask as a string with one character per byte token, '|' for a marker.
std::string mask_of(const SftTokens& t) { return flags(t.trained); }

TEST(SftEncode, AssistantTurnsAndTheirEndAreTrained) {
  const ByteTokenizer tok({"<|im_start|>", "<|im_end|>", "<|endoftext|>"});
  const ChatTemplate chatml = ChatTemplate::parse(kChatMl, "chatml");
  const SftExample ex = conversation(
      R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "bc"},
          {"role": "user", "content": "d"}, {"role": "assistant", "content": "e"}])");
  // "<s>user\na<e>\n<s>assistant\nbc<e>\n<s>user\nd<e>\n<s>assistant\ne<e>\n"
  const std::string user = "000000000";      // <s> u s e r \n a <e> \n
  const std::string header = "00000000000";  // <s> a s s i s t a n t \n
  const SftTokens got = SftEncoder(tok, &chatml, "test").encode(ex);
  EXPECT_EQ(mask_of(got), user + header + "1111" + user + header + "111");
  EXPECT_EQ(got.num_trained, 7);
  const SftTokens last = SftEncoder(tok, &chatml, "test", {.train_on = TrainOn::last}).encode(ex);
  EXPECT_EQ(mask_of(last), user + header + "0000" + user + header + "111");
  const SftTokens all = SftEncoder(tok, &chatml, "test", {.train_on = TrainOn::all}).encode(ex);
  EXPECT_EQ(all.num_trained, int64_t(all.ids.size()));
  EXPECT_EQ(all.ids, got.ids);
  EXPECT_EQ(parse_train_on("last"), TrainOn::last);
  EXPECT_THAT([] { parse_train_on("assistants"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("unknown train_on 'assistants'")));
}

TEST(SftEncode, MaxLengthCutsFromTheRightAndReports) {
  const ByteTokenizer tok({"<|im_start|>", "<|im_end|>"});
  const ChatTemplate chatml = ChatTemplate::parse(kChatMl, "chatml");
  const SftExample ex =
      conversation(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "bc"}])");
  const SftTokens full = SftEncoder(tok, &chatml, "test").encode(ex);
  const SftTokens cut = SftEncoder(tok, &chatml, "test", {.max_length = 21}).encode(ex);
  EXPECT_EQ(cut.truncated, int64_t(full.ids.size()) - 21);
  EXPECT_EQ(cut.ids, std::vector<int32_t>(full.ids.begin(), full.ids.begin() + 21));
  EXPECT_EQ(cut.num_trained, 1);
  // Cut before the answer: no token is trained, and the count says so.
  const SftTokens none = SftEncoder(tok, &chatml, "test", {.max_length = 12}).encode(ex);
  EXPECT_EQ(none.num_trained, 0);
  EXPECT_EQ(none.truncated, int64_t(full.ids.size()) - 12);
  EXPECT_THAT([&] { SftEncoder(tok, &chatml, "test", {.max_length = -1}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("max_length -1 is negative")));
}

TEST(SftEncode, TextAndPlainPromptCompletionUseBosAndEos) {
  const ByteTokenizer tok({"<|endoftext|>"});  // bos = eos = 256
  SftExample text;
  text.where = "t.jsonl line 1";
  text.text = "ab<|endoftext|>";  // already ends with eos: none appended
  const SftEncoder encoder(tok, nullptr, "test");
  EXPECT_EQ(encoder.encode(text).ids, (std::vector<int32_t>{256, 'a', 'b', 256}));
  text.text = "ab";
  EXPECT_EQ(SftEncoder(tok, nullptr, "test", {.add_bos = false}).encode(text).ids,
            (std::vector<int32_t>{'a', 'b', 256}));
  SftExample pc = text;
  pc.format = SftFormat::prompt_completion;
  pc.text = "Q:";
  pc.completion = " A";
  const SftTokens got = encoder.encode(pc);
  EXPECT_EQ(got.ids, (std::vector<int32_t>{256, 'Q', ':', ' ', 'A', 256}));
  EXPECT_EQ(mask_of(got), "000111");
  EXPECT_EQ(mask_of(SftEncoder(tok, nullptr, "test", {.train_on = TrainOn::all}).encode(pc)),
            "111111");
}

TEST(SftEncode, ConversationsNeedATemplateAndItsVariablesReachIt) {
  const ByteTokenizer tok({"<|endoftext|>"});
  const SftExample ex = conversation(R"([{"role": "user", "content": "a"}])");
  EXPECT_THAT([&] { SftEncoder(tok, nullptr, "tiny-model").encode(ex); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "[sft test.jsonl line 1] a messages example is a conversation and needs a "
                  "chat template, but tiny-model has none; pass one with --chat_template FILE")));
  const ChatTemplate t = ChatTemplate::parse(
      "{{ bos_token }}|{{ eos_token }}|{{ greeting }}|{{ tools | length }}", "vars");
  SftExample with_tools = ex;
  with_tools.tools = json::parse(R"([{"type": "function"}, {"type": "function"}])");
  const SftEncoder encoder(
      tok, &t, "test",
      {.train_on = TrainOn::all, .template_variables = json::parse(R"({"greeting": "hi"})")});
  EXPECT_EQ(tok.decode(encoder.encode(with_tools).ids), "<|endoftext|>|<|endoftext|>|hi|2");
}

TEST(SftEncode, ARewrittenEarlierTurnIsAnErrorNamingTheMessage) {
  const ByteTokenizer tok({"<|im_end|>"});
  // Renders the last message differently from the others: earlier turns change as the
  // conversation grows.
  const ChatTemplate t = ChatTemplate::parse(
      "{% for m in messages %}{% if loop.last %}[{{ m.content }}]{% else %}{{ m.content }}"
      "{% endif %}{% endfor %}",
      "rewrites");
  const SftExample ex = conversation(
      R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
          {"role": "user", "content": "c"}])");
  EXPECT_THAT([&] { SftEncoder(tok, &t, "test").encode(ex); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "[sft test.jsonl line 1] message 1 (assistant): the chat template renders "
                  "messages[:1] with the generation prompt as text that is not a prefix of the "
                  "whole conversation's (they differ at byte 0)")));
  EXPECT_EQ(SftEncoder(tok, &t, "test", {.train_on = TrainOn::all}).encode(ex).num_trained, 5);
}

// A template that writes only the users' turns leaves an answer nothing to train: named as
// such, not dropped later as an example "without a target within --seq_len".
TEST(SftEncode, ATemplateThatNeverWritesAnswersIsNamed) {
  const ByteTokenizer tok({"<|im_end|>"});
  const ChatTemplate t = ChatTemplate::parse(
      "{% for m in messages %}{% if m.role == 'user' %}{{ m.content }}<|im_end|>{% endif %}"
      "{% endfor %}",
      "users only");
  const SftExample ex =
      conversation(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])");
  EXPECT_THAT([&] { SftEncoder(tok, &t, "test").encode(ex); },
              ::testing::ThrowsMessage<Error>(HasSubstr(
                  "[sft test.jsonl line 1] message 1 (assistant): the chat template renders it "
                  "as no text (messages[:2] ends where messages[:1] with the generation prompt "
                  "does)")));
  // An answer without text may render as nothing.
  const SftExample empty =
      conversation(R"([{"role": "user", "content": "a"}, {"role": "assistant", "content": " "}])");
  EXPECT_EQ(SftEncoder(tok, &t, "test").encode(empty).num_trained, 0);
}

TEST(SftEncode, APromptEndingWithAnAssistantMessageStillGetsTheGenerationPrompt) {
  const ByteTokenizer tok({"<|im_start|>", "<|im_end|>"});
  const ChatTemplate chatml = ChatTemplate::parse(kChatMl, "chatml");
  SftExample ex =
      conversation(R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": "x"}])");
  ex.format = SftFormat::prompt_completion;
  ex.completion_messages = json::parse(R"([{"role": "assistant", "content": "y"}])");
  // "<s>user\nq<e>\n" "<s>assistant\nx<e>\n" "<s>assistant\n" | "y<e>\n"
  const SftTokens got = SftEncoder(tok, &chatml, "test").encode(ex);
  EXPECT_EQ(mask_of(got), std::string(9 + 14 + 11, '0') + "111");
}

}  // namespace
}  // namespace fitgrad::data
