// The committed GRPO task (data/tasks/arithmetic/, issue 59): the files are its generator's
// output (python3 gen_arithmetic.py --check), the splits are 500 and 100 rows with no problem
// in both, and every answer is right: the problem's two numbers added or subtracted as its
// words say, never negative, which is what makes the reward verifiable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>

namespace fitgrad::data {
namespace {

const std::string kDir = std::string(FITGRAD_SOURCE_DIR) + "/data/tasks/arithmetic/";

std::vector<nlohmann::json> rows(const std::string& file) {
  std::ifstream in(kDir + file);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

TEST(ArithmeticTask, FilesAreTheGeneratorsOutput) {
  if (std::system("python3 -c '' 2>/dev/null") != 0) GTEST_SKIP() << "no python3";
  EXPECT_EQ(std::system(("python3 " + kDir + "gen_arithmetic.py --check").c_str()), 0);
}

TEST(ArithmeticTask, EveryAnswerIsTheProblemsExactResult) {
  const auto train = rows("train.jsonl"), heldout = rows("heldout.jsonl");
  EXPECT_EQ(train.size(), 500u);
  EXPECT_EQ(heldout.size(), 100u);
  std::set<std::string> train_texts;
  const std::regex numbers(R"(\D*?(\d+)\D+?(\d+)\D*)");
  const std::regex subtraction("gives away|taken out|lost|minus");
  for (const auto* split : {&train, &heldout}) {
    for (const nlohmann::json& row : *split) {
      const std::string text = row.at("prompt").at(0).at("content");
      ASSERT_EQ(row.at("prompt").at(0).at("role"), "user");
      if (split == &train)
        train_texts.insert(text);
      else
        EXPECT_FALSE(train_texts.count(text)) << "in both splits: " << text;
      std::smatch m;
      ASSERT_TRUE(std::regex_match(text, m, numbers)) << text;
      const int a = std::stoi(m[1]), b = std::stoi(m[2]);
      const int want = std::regex_search(text, subtraction) ? a - b : a + b;
      EXPECT_GE(want, 0) << text;
      EXPECT_EQ(row.at("answer"), std::to_string(want)) << text;
    }
  }
}

}  // namespace
}  // namespace fitgrad::data
