// Atomic checkpoint directories (train/checkpoint_dir.h): a failed write leaves no
// checkpoint, a replacement is whole, leftovers are ignored, pruning keeps the newest;
// and the loss curve / metrics writers (train/metrics.h).
#include "train/checkpoint_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tensor/error.h"
#include "train/metrics.h"

namespace fitgrad::apps {

using train::commit_checkpoint;
using train::prune_checkpoints;

using train::list_checkpoints;
using train::loss_curve_svg;
using train::MetricsLog;
using train::resolve_resume_dir;
namespace {
namespace fs = std::filesystem;

class CheckpointDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("fitgrad_ckpt_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  static void write(const std::string& dir, const std::string& name, const std::string& text) {
    std::ofstream(fs::path(dir) / name) << text;
  }
  static std::string read(const fs::path& p) {
    std::ifstream in(p);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  fs::path root_;
};

TEST_F(CheckpointDirTest, CommitRenamesACompleteDirectory) {
  std::string path = commit_checkpoint(root_.string(), 5, [](const std::string& d) {
    write(d, "trainer_state.json", "{}");
    write(d, "model.safetensors", "weights");
  });
  EXPECT_EQ(path, (root_ / "checkpoint-5").string());
  EXPECT_EQ(read(root_ / "checkpoint-5" / "model.safetensors"), "weights");
  EXPECT_FALSE(fs::exists(root_ / "tmp-checkpoint-5"));
  ASSERT_EQ(list_checkpoints(root_.string()).size(), 1u);
}

TEST_F(CheckpointDirTest, AFailedWriteLeavesThePreviousCheckpointsAlone) {
  commit_checkpoint(root_.string(), 2,
                    [](const std::string& d) { write(d, "trainer_state.json", "{}"); });
  EXPECT_THROW(commit_checkpoint(root_.string(), 4,
                                 [](const std::string& d) {
                                   write(d, "trainer_state.json", "{}");
                                   throw Error("[test] disk full");
                                 }),
               Error);
  auto all = list_checkpoints(root_.string());
  ASSERT_EQ(all.size(), 1u);  // the half-written step 4 is not a checkpoint
  EXPECT_EQ(all[0].first, 2);
  // The next save of step 4 replaces the leftover temporary directory.
  commit_checkpoint(root_.string(), 4,
                    [](const std::string& d) { write(d, "trainer_state.json", "{\"ok\": 1}"); });
  EXPECT_EQ(list_checkpoints(root_.string()).size(), 2u);
  EXPECT_FALSE(fs::exists(root_ / "tmp-checkpoint-4"));
}

TEST_F(CheckpointDirTest, ReplacingAStepKeepsOneWholeCopy) {
  for (const char* text : {"first", "second"})
    commit_checkpoint(root_.string(), 7,
                      [&](const std::string& d) { write(d, "trainer_state.json", text); });
  EXPECT_EQ(read(root_ / "checkpoint-7" / "trainer_state.json"), "second");
  EXPECT_EQ(std::distance(fs::directory_iterator(root_), fs::directory_iterator()), 1);
}

TEST_F(CheckpointDirTest, ListingSortsByStepAndSkipsStrangers) {
  for (int step : {10, 9, 100})
    commit_checkpoint(root_.string(), step,
                      [](const std::string& d) { write(d, "trainer_state.json", "{}"); });
  fs::create_directories(root_ / "checkpoint-abc");
  fs::create_directories(root_ / "checkpoint-50");  // no trainer_state.json: incomplete
  auto all = list_checkpoints(root_.string());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].first, 9);
  EXPECT_EQ(all[2].first, 100);
  EXPECT_EQ(resolve_resume_dir("last", root_.string()), (root_ / "checkpoint-100").string());
  prune_checkpoints(root_.string(), 1);
  ASSERT_EQ(list_checkpoints(root_.string()).size(), 1u);
  EXPECT_EQ(list_checkpoints(root_.string())[0].first, 100);
}

TEST(LossCurve, DrawsEveryLoggedPoint) {
  std::vector<nlohmann::json> history;
  for (int s = 1; s <= 5; ++s) history.push_back({{"step", s}, {"loss", 5.0 - s}});
  history.push_back({{"step", 5}, {"eval_loss", 0.5}, {"eval_perplexity", 1.65}});
  std::string svg = loss_curve_svg(history, "a <run>");
  EXPECT_EQ(svg.rfind("<svg", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find("a &lt;run&gt;"), std::string::npos);  // the title is escaped
  // One polyline of 5 points for the training loss, one of 1 point plus a dot for eval.
  size_t line = svg.find("<polyline");
  ASSERT_NE(line, std::string::npos);
  std::string points = svg.substr(svg.find("points=\"", line) + 8);
  points = points.substr(0, points.find('"'));
  EXPECT_EQ(std::count(points.begin(), points.end(), ','), 5);
  size_t dots = 0;
  for (size_t at = svg.find("<circle"); at != std::string::npos; at = svg.find("<circle", at + 1))
    ++dots;
  EXPECT_EQ(dots, 1u);
}

TEST(LossCurve, EmptyHistorySaysSo) {
  EXPECT_NE(loss_curve_svg({}, "t").find("no losses logged yet"), std::string::npos);
}

TEST_F(CheckpointDirTest, MetricsLogStartsFromTheGivenHistory) {
  std::string path = (root_ / "metrics.jsonl").string();
  {
    MetricsLog log(path, {nlohmann::json{{"step", 1}, {"loss", 2.5}}});
    log.append({{"step", 2}, {"loss", 2.25}});
  }
  EXPECT_EQ(read(path), "{\"loss\":2.5,\"step\":1}\n{\"loss\":2.25,\"step\":2}\n");
  MetricsLog again(path);  // a fresh run truncates
  EXPECT_EQ(read(path), "");
}

}  // namespace
}  // namespace fitgrad::apps
