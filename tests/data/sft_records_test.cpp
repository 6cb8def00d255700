// Instruction and chat dataset files (data/sft_records.h, data/sft_formats.h): folders (order,
// hidden entries, blank lines), each format's rules on the fixture records of
// tests/golden/sft/records, detection and forced formats, every bad-record error with its file,
// line or index and field, the source errors that are never skipped, and skip_bad_examples'
// counts.
#include "data/sft_records.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>

#include "data/utf8.h"
#include "tensor/error.h"
#include "tests/data/scratch_folder.h"

namespace fitgrad::data {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;
using ::testing::HasSubstr;

const std::string kRecords = std::string(FITGRAD_GOLDEN_DIR) + "/sft/records";

using SftFiles = fitgrad::testing::ScratchFolder;

TEST_F(SftFiles, EachFixtureFileIsDetectedAsItsFormat) {
  const std::map<std::string, SftFormat> want = {
      {"text.jsonl", SftFormat::text},
      {"alpaca.json", SftFormat::alpaca},
      {"sharegpt.jsonl", SftFormat::sharegpt},
      {"messages.jsonl", SftFormat::messages},
      {"prompt_completion.jsonl", SftFormat::prompt_completion},
      {"prompt_completion_chat.jsonl", SftFormat::prompt_completion}};
  for (const auto& [file, format] : want) {
    SftReadReport report;
    const std::vector<SftExample> examples = read_sft_examples(kRecords + "/" + file, {}, &report);
    EXPECT_EQ(report.examples, int64_t(examples.size())) << file;
    EXPECT_EQ(report.skipped, 0) << file;
    for (const SftExample& ex : examples) EXPECT_EQ(ex.format, format) << file;
  }
  // text.jsonl has a blank line 2: the records are on lines 1, 3 and 4.
  const std::vector<SftExample> text = read_sft_examples(kRecords + "/text.jsonl");
  ASSERT_EQ(text.size(), 3u);
  EXPECT_EQ(text[1].where, kRecords + "/text.jsonl line 3");
  EXPECT_EQ(text[2].text, "Emma Woodhouse, handsome, clever, and rich");
  EXPECT_EQ(read_sft_examples(kRecords + "/alpaca.json")[2].where,
            kRecords + "/alpaca.json index 2");
}

TEST_F(SftFiles, AFolderReadsItsDatasetFilesInPathOrderEachWithItsOwnFormat) {
  write("b.jsonl", "{\"text\": \"b\"}\n");
  write("a/z.json", R"([{"instruction": "i", "output": "o"}])");
  write("a/y.jsonl", "\n\r\n{\"messages\": [{\"role\": \"user\", \"content\": \"m\"}]}\r\n");
  write(".hidden.jsonl", "not json");
  write(".hidden_dir/c.jsonl", "not json");
  write("notes.md", "not json");  // no data file
  SftReader reader(dir_.string());
  EXPECT_EQ(reader.files(),
            (std::vector<std::string>{path("a/y.jsonl"), path("a/z.json"), path("b.jsonl")}));
  std::vector<SftExample> got;
  while (std::optional<SftExample> ex = reader.next()) got.push_back(*ex);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].format, SftFormat::messages);
  EXPECT_EQ(got[0].where, path("a/y.jsonl") + " line 3");
  EXPECT_EQ(got[1].format, SftFormat::alpaca);
  EXPECT_EQ(got[2].format, SftFormat::text);
  EXPECT_EQ(got[2].text, "b");
  EXPECT_FALSE(reader.next().has_value());
  // A .txt file among them is named (Note [One kind of data a folder] in data/folder_files.cpp).
  write("notes.txt", "not json");
  EXPECT_THROW(
      {
        try {
          SftReader again(dir_.string());
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("b.jsonl) and text files (.txt: notes.txt)"));
          throw;
        }
      },
      Error);
}

TEST_F(SftFiles, AlpacaJoinsInstructionAndInputAndAddsSystemAndHistory) {
  const std::vector<SftExample> ex = read_sft_examples(kRecords + "/alpaca.json");
  ASSERT_EQ(ex.size(), 4u);
  EXPECT_EQ(ex[0].messages, json::parse(R"([
      {"role": "user", "content": "Give three tips for staying healthy."},
      {"role": "assistant", "content": "Eat vegetables, sleep well, and walk every day."}])"));
  EXPECT_EQ(ex[1].messages[0]["content"],
            "Translate the sentence into French.\nGood morning, my dear friend.");
  EXPECT_EQ(ex[2].messages[0], json::parse(R"({"role": "system",
                                               "content": "You are a concise assistant."})"));
  EXPECT_EQ(ex[3].messages, json::parse(R"([
      {"role": "user", "content": "Who is Emma?"},
      {"role": "assistant", "content": "The heroine of Austen's novel."},
      {"role": "user", "content": "And what did she lack?"},
      {"role": "assistant", "content": "A sense of her own faults."}])"));
  // Only the input: it alone is the user's message.
  write("only_input.jsonl", R"({"instruction": "", "input": "x", "output": "y", "system": null})");
  EXPECT_EQ(read_sft_examples(path("only_input.jsonl"))[0].messages[0]["content"], "x");
}

TEST_F(SftFiles, ShareGptMapsRoleNamesAndKeepsSystemAndTools) {
  write("roles.jsonl",
        R"({"system": "S", "tools": "[{\"type\": \"function\"}]", "conversations": [)"
        R"({"from": "human", "value": "1"}, {"from": "gpt", "value": "2"},)"
        R"({"from": "observation", "value": "3"}, {"from": "model", "value": "4"},)"
        R"({"from": "input", "value": "5"}, {"from": "output", "value": "6"},)"
        R"({"from": "function_response", "value": "7"}, {"from": "tool", "value": "8"},)"
        R"({"from": "user", "value": "9"}, {"from": "assistant", "value": "10"},)"
        R"({"from": "system", "value": "11"}]})");
  const SftExample ex = read_sft_examples(path("roles.jsonl"))[0];
  std::vector<std::string> roles;
  for (const json& m : ex.messages) roles.push_back(m["role"]);
  EXPECT_EQ(roles,
            (std::vector<std::string>{"system", "user", "assistant", "tool", "assistant", "user",
                                      "assistant", "tool", "tool", "user", "assistant", "system"}));
  EXPECT_EQ(ex.messages[0]["content"], "S");
  EXPECT_EQ(ex.tools, json::parse(R"([{"type": "function"}])"));
}

TEST_F(SftFiles, MessagesKeepEveryKeyInOrder) {
  const std::vector<SftExample> ex = read_sft_examples(kRecords + "/messages.jsonl");
  ASSERT_EQ(ex.size(), 4u);
  EXPECT_EQ(ex[2].messages[1]["tool_calls"][0]["function"]["arguments"]["city"], "Paris");
  EXPECT_EQ(ex[2].messages[2]["name"], "get_weather");
  EXPECT_EQ(ex[2].tools[0]["function"]["name"], "get_weather");
  EXPECT_EQ(ex[3].messages[1].dump(),
            R"({"role":"assistant","content":"1, 2, 3.","reasoning_content":"Easy."})");
  EXPECT_TRUE(ex[0].tools.is_null());
}

TEST_F(SftFiles, PromptCompletionIsPlainOrConversational) {
  const std::vector<SftExample> plain = read_sft_examples(kRecords + "/prompt_completion.jsonl");
  EXPECT_FALSE(plain[0].conversational());
  EXPECT_EQ(plain[0].text, "The capital of France is");
  EXPECT_EQ(plain[0].completion, " Paris.");
  const std::vector<SftExample> chat =
      read_sft_examples(kRecords + "/prompt_completion_chat.jsonl");
  EXPECT_TRUE(chat[1].conversational());
  EXPECT_EQ(chat[1].messages.size(), 2u);
  EXPECT_EQ(chat[1].completion_messages[0]["content"], "Four.");
}

TEST_F(SftFiles, AForcedFormatAndTextFieldApplyToEveryFile) {
  write("t.jsonl", "{\"body\": \"hello\", \"messages\": []}\n");
  // Detection would say messages (and fail on its empty list); forced, the field decides.
  const std::vector<SftExample> ex =
      read_sft_examples(path("t.jsonl"), {.format = SftFormat::text, .text_field = "body"});
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].text, "hello");
  try {
    read_sft_examples(kRecords + "/messages.jsonl", {.format = SftFormat::alpaca});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("[sft " + kRecords +
                                    "/messages.jsonl line 1] field "
                                    "'instruction': is missing (format alpaca forced by "
                                    "--dataset_format)"));
  }
  EXPECT_EQ(parse_sft_format("sharegpt"), SftFormat::sharegpt);
  EXPECT_EQ(parse_sft_format("auto"), SftFormat::auto_detect);
  EXPECT_THAT([] { parse_sft_format("chatml"); },
              ::testing::ThrowsMessage<Error>(HasSubstr("unknown dataset format 'chatml'")));
}

// Every bad record: the error names the file, the line or index and the field.
// Preference records: strings or message lists, each answer a completion of the prompt; a
// mixed record, a missing answer or an implicit prompt is an error naming the field.
TEST_F(SftFiles, PreferenceRecordsGiveTwoCompletionsOfOnePrompt) {
  write("p.jsonl", R"({"prompt": "Two and two make", "chosen": " four.", "rejected": " five."}
{"prompt": [{"role": "user", "content": "Capital of France?"}], "chosen": [{"role": "assistant", "content": "Paris."}], "rejected": [{"role": "assistant", "content": "Lyon."}], "tools": []}
)");
  const std::vector<SftExample> pairs = read_sft_examples(path("p.jsonl"));
  ASSERT_EQ(pairs.size(), 2u);
  EXPECT_EQ(pairs[0].format, SftFormat::preference);
  const auto [chosen, rejected] = preference_answers(pairs[0]);
  EXPECT_EQ(chosen.format, SftFormat::prompt_completion);
  EXPECT_EQ(chosen.text, "Two and two make");
  EXPECT_EQ(chosen.completion, " four.");
  EXPECT_EQ(rejected.text, "Two and two make");
  EXPECT_EQ(rejected.completion, " five.");
  const auto [chat_chosen, chat_rejected] = preference_answers(pairs[1]);
  EXPECT_TRUE(chat_rejected.conversational());
  EXPECT_EQ(chat_chosen.completion_messages[0]["content"], "Paris.");
  EXPECT_EQ(chat_rejected.completion_messages[0]["content"], "Lyon.");
  EXPECT_EQ(chat_rejected.messages, pairs[1].messages);
  EXPECT_TRUE(chat_rejected.tools.is_array());
  EXPECT_EQ(parse_sft_format("preference"), SftFormat::preference);

  const std::vector<std::pair<std::string, std::string>> bad = {
      {R"({"prompt": "p", "chosen": "c", "rejected": ["r"]})",
       "line 1] field 'rejected': must be a string, as the prompt is, not array"},
      {R"({"prompt": [{"role": "user", "content": "q"}], "chosen": "c", "rejected": []})",
       "line 1] field 'chosen': must be a list of messages, as the prompt is, not string"},
      {R"({"chosen": [{"role": "user", "content": "q"}], "rejected": [{"role": "user", "content": "r"}]})",
       "line 1] a preference record needs its prompt in a field 'prompt'"}};
  for (const auto& [record, message] : bad) {
    write("bad.jsonl", record + "\n");
    try {
      read_sft_examples(path("bad.jsonl"));
      ADD_FAILURE() << record;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(message));
    }
  }
  SftReadOptions forced;
  forced.format = SftFormat::preference;
  write("bad.jsonl", R"({"prompt": "p", "chosen": "c"})" + std::string("\n"));
  EXPECT_THROW(
      {
        try {
          read_sft_examples(path("bad.jsonl"), forced);
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("field 'rejected': is missing"));
          throw;
        }
      },
      Error);
}

TEST_F(SftFiles, BadRecordsAreErrorsNamingFileRecordAndField) {
  struct Row {
    std::string name, file, text;
    std::vector<std::string> expected;
  };
  const std::string msg = R"({"messages": [{"role": "user", "content": "q"}]})";
  const std::vector<Row> rows = {
      {"invalid JSON", "a.jsonl", msg + "\n{\"messages\": [\n", {"a.jsonl line 2] invalid JSON: "}},
      {"not an object",
       "a.jsonl",
       msg + "\n[1, 2]\n",
       {"a.jsonl line 2] the record must be a JSON object, not array (the file's format, "
        "messages, detected from line 1)"}},
      {"format of another file",
       "a.jsonl",
       msg + "\n\n" + R"({"conversations": [{"from": "human", "value": "q"}]})",
       {"a.jsonl line 3] field 'messages': is missing (the file's format, messages, detected "
        "from line 1)"}},
      {"unknown keys",
       "a.jsonl",
       R"({"question": "q", "answer": "a"})",
       {"a.jsonl line 1] cannot tell the dataset format from the keys 'question', 'answer'",
        "--dataset_format"}},
      {"empty messages",
       "a.jsonl",
       R"({"messages": []})",
       {"a.jsonl line 1] field 'messages': is an empty conversation"}},
      {"messages not a list",
       "a.jsonl",
       R"({"messages": "hi"})",
       {"field 'messages': must be a list, not string"}},
      {"unknown message role",
       "a.jsonl",
       R"({"messages": [{"role": "user", "content": "q"}, {"role": "bot", "content": "a"}]})",
       {"field 'messages[1].role': unknown role 'bot'; use system, user, assistant or tool"}},
      {"missing role",
       "a.jsonl",
       R"({"messages": [{"content": "q"}]})",
       {"field 'messages[0].role': is missing"}},
      {"content of the wrong type",
       "a.jsonl",
       R"({"messages": [{"role": "user", "content": 3}]})",
       {"field 'messages[0].content': must be a string or a list of content parts, not number"}},
      {"missing content",
       "a.jsonl",
       R"({"messages": [{"role": "user"}]})",
       {"field 'messages[0].content': is missing (only a message with tool_calls"}},
      {"tool_calls not a list",
       "a.jsonl",
       R"({"messages": [{"role": "assistant", "tool_calls": {}}]})",
       {"field 'messages[0].tool_calls': must be a list, not object"}},
      {"tools not a list",
       "a.jsonl",
       msg.substr(0, msg.size() - 1) + R"(, "tools": {"a": 1}})",
       {"field 'tools': must be a list of tool schemas, not object"}},
      {"tools string not JSON",
       "a.jsonl",
       R"({"conversations": [{"from": "human", "value": "q"}], "tools": "[{"})",
       {"field 'tools': is a string that is not valid JSON"}},
      {"unknown sharegpt role",
       "s.json",
       R"([{"conversations": [{"from": "human", "value": "q"}]},
           {"conversations": [{"from": "function_call", "value": "{}"}]}])",
       {"s.json index 1] field 'conversations[0].from': unknown role 'function_call'"}},
      {"sharegpt value missing",
       "s.json",
       R"([{"conversations": [{"from": "human"}]}])",
       {"s.json index 0] field 'conversations[0].value': is missing"}},
      {"sharegpt turn not an object",
       "s.json",
       R"([{"conversations": ["hi"]}])",
       {"field 'conversations[0]': must be an object, not string"}},
      {"empty conversations",
       "s.json",
       R"([{"conversations": []}])",
       {"field 'conversations': is an empty conversation"}},
      {"alpaca output missing",
       "al.jsonl",
       R"({"instruction": "i"})",
       {"al.jsonl line 1] field 'output': is missing (the file's format, alpaca, detected"}},
      {"alpaca input not a string",
       "al.jsonl",
       R"({"instruction": "i", "input": 1, "output": "o"})",
       {"field 'input': must be a string, not number"}},
      {"alpaca history not pairs",
       "al.jsonl",
       R"({"instruction": "i", "output": "o", "history": [["a"]]})",
       {"field 'history[0]': must be a [prompt, response] pair of strings"}},
      {"text not a string",
       "t.jsonl",
       R"({"text": ["a"]})",
       {"t.jsonl line 1] field 'text': must be a string, not array"}},
      {"prompt string, completion list",
       "p.jsonl",
       R"({"prompt": "p", "completion": [{"role": "assistant", "content": "c"}]})",
       {"field 'completion': must be a string, as the prompt is, not array"}},
      {"prompt list, completion string",
       "p.jsonl",
       R"({"prompt": [{"role": "user", "content": "p"}], "completion": "c"})",
       {"field 'completion': must be a list of messages, as the prompt is, not string"}},
      {"prompt a number",
       "p.jsonl",
       R"({"prompt": 1, "completion": "c"})",
       {"field 'prompt': must be a string or a list of messages, not number"}},
      {"completion role unknown",
       "p.jsonl",
       R"({"prompt": [{"role": "user", "content": "p"}], "completion": [{"role": "gpt", "content": "c"}]})",
       {"field 'completion[0].role': unknown role 'gpt'"}},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    fs::remove_all(dir_);
    const std::string file = write(r.file, r.text);
    try {
      read_sft_examples(file);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("[sft " + path("")));
      for (const std::string& s : r.expected) EXPECT_THAT(e.what(), HasSubstr(s));
      EXPECT_THAT(e.what(), HasSubstr("fix the record, or pass --skip_bad_examples"));
    }
  }
}

// A megabyte of role is named by its first characters and its length, not echoed whole.
TEST_F(SftFiles, AHugeValueIsCutInTheErrorLine) {
  const std::string file =
      write("r.jsonl", R"({"messages": [{"role": ")" + std::string(1'000'000, 'r') +
                           R"(", "content": "q"}]})" + "\n");
  try {
    read_sft_examples(file);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unknown role '" + std::string(64, 'r') +
                                    "... (1000000 bytes)'; use system, user"));
    EXPECT_LT(std::string(e.what()).size(), 1000u);
  }
}

TEST_F(SftFiles, SourceErrorsAreNeverSkipped) {
  struct Row {
    std::string name;
    std::function<std::string()> make;
    std::string expected;
  };
  const std::vector<Row> rows = {
      {"missing", [&] { return path("nope.jsonl"); }, "nope.jsonl] no such file or folder"},
      {"not a dataset file", [&] { return write("d.csv", "a,b"); },
       "d.csv] is not a dataset file: name it .jsonl"},
      {"folder without dataset files",
       [&] {
         write("f/a.txt", "x");
         return path("f");
       },
       "f] the folder holds no .jsonl or .json file"},
      {".json not an array", [&] { return write("o.json", R"({"text": "a"})"); },
       "o.json] a .json dataset must be an array of records, not object"},
      {".json not JSON", [&] { return write("o.json", "[{"); }, "o.json] invalid JSON: "},
      {"no records", [&] { return write("e.jsonl", "\n \n"); }, "e.jsonl] has no records"},
      {"every record bad", [&] { return write("b.jsonl", "[1]\n[2]\n"); },
       "b.jsonl] has no good record: all 2 were bad (skip_bad_examples); the first: [sft "},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    try {
      read_sft_examples(r.make(), {.skip_bad_examples = true});
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(r.expected));
    }
  }
}

TEST_F(SftFiles, SkipBadExamplesCountsThemAndKeepsTheFirstMessages) {
  std::string text;
  for (int i = 0; i < 8; ++i) text += "{\"text\": " + std::to_string(i) + "}\n";  // bad
  text += "{\"text\": \"good\"}\nnot json\n";
  write("d.jsonl", text);
  // The first bad record fits no format, so detection waits for a good one... which, in a
  // forced format, is every record's own check.
  SftReadReport report;
  const std::vector<SftExample> ex = read_sft_examples(
      path("d.jsonl"), {.format = SftFormat::text, .skip_bad_examples = true}, &report);
  ASSERT_EQ(ex.size(), 1u);
  EXPECT_EQ(ex[0].text, "good");
  EXPECT_EQ(ex[0].where, path("d.jsonl") + " line 9");
  EXPECT_EQ(report.examples, 1);
  EXPECT_EQ(report.skipped, 9);
  ASSERT_EQ(report.first_errors.size(), SftReadReport::kKeptErrors);
  EXPECT_THAT(report.first_errors[0],
              HasSubstr("d.jsonl line 1] field 'text': must be a string, not number"));
  // Detected: records that fit no format are skipped until one decides.
  write("e.jsonl", "{\"q\": 1}\n{\"text\": \"a\"}\n{\"text\": \"b\", \"messages\": []}\n");
  const std::vector<SftExample> detected =
      read_sft_examples(path("e.jsonl"), {.skip_bad_examples = true}, &report);
  ASSERT_EQ(detected.size(), 2u);
  EXPECT_EQ(detected[1].format, SftFormat::text);
  EXPECT_EQ(report.skipped, 1);
  EXPECT_EQ(report.first_errors.size(), 1u);
  EXPECT_THAT(report.first_errors[0], HasSubstr("cannot tell the dataset format"));
}

}  // namespace
}  // namespace fitgrad::data
