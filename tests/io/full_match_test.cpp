// io::FullMatch (Note [Patterns in linear time] in io/full_match.h): Python's re.fullmatch on
// the patterns users give target_modules, a nested quantifier that made std::regex backtrack
// for ever answered at once, and what an automaton cannot run refused by name. Both users,
// PEFT's target_modules (nn/target_modules.h) and --optim_target_modules, go through it.
#include "io/full_match.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <optional>
#include <thread>

#include "nn/target_modules.h"
#include "optim/target_modules.h"
#include "tensor/error.h"
#include "tensor/tensor.h"

namespace fitgrad::io {
namespace {

using ::testing::HasSubstr;

TEST(FullMatch, MatchesTheWholeStringAsPythonsFullmatch) {
  const FullMatch qv(R"(.*\.(q|v)_proj)", "[test]");
  EXPECT_TRUE(qv("model.layers.0.self_attn.q_proj"));
  EXPECT_FALSE(qv("model.layers.0.self_attn.q_proj.lora_A"));  // fullmatch, not search
  EXPECT_FALSE(qv("model.layers.0.self_attn.k_proj"));
  const FullMatch layers(R"(model\.layers\.[0-2]\.\w+\.(up|down)_proj)", "[test]");
  EXPECT_TRUE(layers("model.layers.2.mlp.down_proj"));
  EXPECT_FALSE(layers("model.layers.3.mlp.down_proj"));
  EXPECT_TRUE(FullMatch("a{2,3}b?", "[test]")("aaa"));
  EXPECT_FALSE(FullMatch("", "[test]")("x"));
  EXPECT_FALSE(FullMatch()("x"));
}

// Python reads (?=...) and \1; an automaton cannot, and the error says what was given and why.
TEST(FullMatch, WhatAnAutomatonCannotRunIsRefusedByName) {
  for (const char* pattern : {"(unclosed", "*w", "(a)\\1", "q(?=_proj)"}) {
    try {
      FullMatch(pattern, "[target_modules]");
      ADD_FAILURE() << pattern << " was read";
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("[target_modules]: '") + pattern +
                                      "' is not a regular expression fitgrad reads"));
    }
  }
}

// "(.*)*Z" against a path that does not end in Z: std::regex backtracked exponentially and
// never returned (nor answered SIGINT). Each user must answer within a bound far above the
// microseconds it takes; the matcher runs on a thread of its own so that a hang fails the test
// instead of stalling the suite.
TEST(FullMatch, NestedQuantifiersAnswerAtOnce) {
  const std::string path = "model.layers.12.self_attn.q_proj_" + std::string(48, 'a');
  // The answer, or nothing when there was none within the bound.
  const auto within = [](const std::function<bool()>& f) -> std::optional<bool> {
    auto done = std::make_shared<std::promise<bool>>();
    std::future<bool> answer = done->get_future();
    std::thread([f, done] { done->set_value(f()); }).detach();
    if (answer.wait_for(std::chrono::seconds(20)) != std::future_status::ready) return {};
    return answer.get();
  };
  const std::optional<bool> no = false;
  EXPECT_EQ(within([&] { return FullMatch("(.*)*Z", "[test]")(path); }), no);
  EXPECT_EQ(within([&] { return nn::TargetModules::regex("(a|aa)*(.*)*Z").matches(path); }), no);
  const Tensor w = Tensor::empty({4, 3});
  EXPECT_EQ(within([&] {
              return optim::is_target_module({"zzz", "(.*)*Z"}, path + ".weight", w);
            }),
            no);
}

}  // namespace
}  // namespace fitgrad::io
