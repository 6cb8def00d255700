// Note [Invalid UTF-8 in written JSON] (io/json_file.h): a run whose output folder's name is not
// UTF-8 and whose --eval_prompts completion is one byte of a character (a byte-level model
// trained on Chinese, --eval_max_new_tokens 1) trains, evaluates and saves; every JSON file it
// writes parses, with U+FFFD where the bytes were, and eval_samples.jsonl marks the record.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/json_file.h"
#include "tests/train/train_fixture.h"
#include "train/trainer.h"

namespace fitgrad::apps::test_train {
namespace {

class InvalidUtf8 : public TrainFixture {};

TEST_F(InvalidUtf8, ARunWritesReplacementCharactersAndSaysSo) {
  std::string chinese;
  for (int i = 0; i < 400; ++i) chinese += "中文文本，还有标点。";
  TrainArgs a = args(write_file("zh.txt", chinese), std::string("out-\xff\xfe-run"));
  a.max_steps = 2;
  a.eval_steps = 2;
  a.save_steps = 2;
  a.eval_max_new_tokens = 1;
  a.eval_prompts = write_file("prompts.jsonl", R"({"prompt": "中文"})"
                                               "\n");
  std::ostringstream out, err;
  ASSERT_EQ(train::run_train(a, out, err), 0) << err.str();

  const fs::path dir(a.output_dir);
  std::vector<nlohmann::json> samples;
  std::ifstream file(dir / "eval_samples.jsonl");
  for (std::string line; std::getline(file, line);) samples.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(samples.size(), 1u);
  // One byte of a three-byte character: written as U+FFFD, and marked.
  EXPECT_EQ(samples[0].at("completion"), "\xef\xbf\xbd") << samples[0];
  EXPECT_EQ(samples[0].at("invalid_utf8_replaced"), true) << samples[0];
  const nlohmann::json state =
      nlohmann::json::parse(std::ifstream(dir / "checkpoint-2" / "trainer_state.json"));
  EXPECT_EQ(state.at("args").at("output_dir"),
            (root_ / "out-\xef\xbf\xbd\xef\xbf\xbd-run").string());
  std::ifstream metrics(dir / "metrics.jsonl");
  for (std::string line; std::getline(metrics, line);) EXPECT_NO_THROW(nlohmann::json::parse(line));

  // As nlohmann's replace mode: each ill-formed sequence one U+FFFD, a cut one at the end too.
  EXPECT_EQ(io::json_text(nlohmann::json("a\xe4\xb8"
                                         "b\xff")),
            "\"a\xef\xbf\xbd"
            "b\xef\xbf\xbd\"");
  EXPECT_EQ(io::json_text(nlohmann::ordered_json{{"k", "\xe4"}}), "{\"k\":\"\xef\xbf\xbd\"}");
}

}  // namespace
}  // namespace fitgrad::apps::test_train
