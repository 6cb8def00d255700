// The JSON nesting bound (io/json_depth.h, Note [JSON nesting bound]; issue 58): every reader
// of a user's JSON refuses a text that nests deeper than 512 arrays and objects with an error
// naming the file and the place, where a value nesting 100,000 levels used to parse and then
// run the stack out in the code that copies or converts it (SIGSEGV); 512 levels still read.
#include "io/json_depth.h"

#include <gtest/gtest.h>

#include "data/sft_records.h"
#include "io/json_file.h"
#include "nn/lora_adapter.h"
#include "tensor/error.h"
#include "tests/data/scratch_folder.h"
#include "train/chat_prompt.h"

namespace fitgrad {
namespace {

using testing::ScratchFolder;

std::string nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// The reproduction: a record whose message content nests `depth` lists.
std::string deep_record(int depth) {
  return "{\"messages\":[{\"role\":\"user\",\"content\":" + nested(depth) +
         "},{\"role\":\"assistant\",\"content\":\"hi\"}]}";
}

template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JsonDepth, CountsBracketsOutsideStringsAndNamesThePlace) {
  EXPECT_NO_THROW(io::check_json_depth(nested(io::kMaxJsonDepth), "[x]"));
  EXPECT_NO_THROW(io::check_json_depth("[\"" + std::string(100000, '[') + "\\\"[\"]", "[x]"));
  EXPECT_EQ(error_of([] { io::check_json_depth(nested(io::kMaxJsonDepth + 1), "[x]"); }),
            "[x] JSON nests deeper than 512 arrays and objects (at column 513); fitgrad reads at "
            "most 512 levels, as no real record, conversation or configuration needs more");
  EXPECT_NE(error_of([] {
              io::check_json_depth("{\n \"a\":\n  " + nested(600), "[x]");
            }).find("(at line 3, column 514)"),
            std::string::npos);
}

class DeepJson : public ScratchFolder {};

TEST_F(DeepJson, InstructionRecordsAreBadRecordsNamingTheLine) {
  const std::string data = write("deep.jsonl", deep_record(3) + "\n" + deep_record(100000) + "\n");
  EXPECT_NE(error_of([&] {
              data::read_sft_examples(data, {});
            }).find("deep.jsonl line 2] invalid JSON: JSON nests deeper than 512"),
            std::string::npos);
  data::SftReadOptions skip;
  skip.skip_bad_examples = true;
  data::SftReadReport report;
  EXPECT_EQ(data::read_sft_examples(data, skip, &report).size(), 1u);
  EXPECT_EQ(report.skipped, 1);
  const std::string array = write("deep.json", "[\n" + deep_record(100000) + "\n]");
  EXPECT_NE(error_of([&] {
              data::read_sft_examples(array, {});
            }).find("deep.json] JSON nests deeper than 512 arrays and objects (at line 2,"),
            std::string::npos);
  // 500 levels are real JSON, read and converted.
  EXPECT_EQ(data::read_sft_examples(write("ok.jsonl", deep_record(500) + "\n"), {}).size(), 1u);
}

TEST_F(DeepJson, ToolsHeldInAStringAreBounded) {
  const std::string record =
      "{\"messages\":[{\"role\":\"user\",\"content\":\"q\"},{\"role\":"
      "\"assistant\",\"content\":\"a\"}],\"tools\":\"" +
      nested(100000) + "\"}\n";
  EXPECT_NE(error_of([&] {
              data::read_sft_examples(write("tools.jsonl", record), {});
            }).find("field 'tools': is a string whose JSON nests deeper than 512"),
            std::string::npos);
}

TEST_F(DeepJson, ConversationsConfigsAndAdaptersNameTheirFile) {
  const std::string messages = write("messages.json", deep_record(100000));
  EXPECT_NE(error_of([&] {
              train::read_conversation(messages, "generate");
            }).find("[generate] " + messages + ": JSON nests deeper than 512"),
            std::string::npos);
  const std::string config = write("config.json", "{\"a\": " + nested(100000) + "}");
  EXPECT_NE(error_of([&] {
              io::read_json_file(config, "[model config.json]");
            }).find("[model config.json] JSON nests deeper than 512"),
            std::string::npos);
  write("adapter/adapter_config.json", "{\"peft_type\": \"LORA\", \"x\": " + nested(100000) + "}");
  EXPECT_NE(error_of([&] {
              nn::read_adapter_config(path("adapter"));
            }).find("adapter_config.json: JSON nests deeper than 512"),
            std::string::npos);
}

}  // namespace
}  // namespace fitgrad
