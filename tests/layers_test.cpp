// The layer DAG of DESIGN.md, checked on the source tree: no file includes a project header
// from a layer that its own layer may not use. The table below is the same DAG as the
// CMake targets' link lists (CMakeLists.txt, "io/, nn/, optim/, data/, train/"); a file that broke
// it would either fail to link there or fail here, and this test names the file and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Layer -> the layers its files may include (itself included).
const std::map<std::string, std::set<std::string>>& allowed() {
  static const std::map<std::string, std::set<std::string>> dag = {
      {"tensor", {"tensor"}},
      {"cuda", {"cuda", "tensor"}},
      {"io", {"io", "tensor"}},
      {"autograd", {"autograd", "tensor"}},
      {"nn", {"nn", "autograd", "io", "tensor"}},
      {"optim", {"optim", "autograd", "io", "tensor"}},
      {"data", {"data", "io", "tensor"}},
      {"dist", {"dist", "optim", "cuda", "autograd", "io", "tensor"}},
      {"train", {"train", "nn", "optim", "data", "dist", "autograd", "io", "tensor"}},
      {"apps",
       {"apps", "train", "data", "nn", "optim", "dist", "autograd", "io", "tensor", "cuda"}},
      // A program embedding fitgrad uses the library, never the command line's apps/.
      {"examples", {"train", "data", "nn", "optim", "dist", "autograd", "io", "tensor", "cuda"}},
  };
  return dag;
}

// The project include in one line ("nn/module.h" -> "nn"), or "" for none.
std::string included_layer(const std::string& line) {
  static const std::regex include(R"re(^\s*#\s*include\s+"([a-z_]+)/)re");
  std::smatch m;
  return std::regex_search(line, m, include) ? m[1].str() : "";
}

TEST(Layers, NoFileIncludesALayerAboveItsOwn) {
  const fs::path root = FITGRAD_SOURCE_DIR;
  std::vector<std::string> violations;
  size_t files = 0;
  for (const auto& [layer, may_use] : allowed()) {
    if (!fs::exists(root / layer)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root / layer)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".h" && ext != ".cpp" && ext != ".cu" && ext != ".cuh") continue;
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      for (int n = 1; std::getline(in, line); ++n) {
        const std::string used = included_layer(line);
        if (used.empty() || may_use.count(used) || !allowed().count(used)) continue;
        violations.push_back(fs::relative(entry.path(), root).string() + ":" + std::to_string(n) +
                             " (" + layer + ") includes " + used + "/");
      }
    }
  }
  EXPECT_GT(files, 100u) << "the source tree was not found under " << root;
  for (const std::string& v : violations) ADD_FAILURE() << v;
}

// The checker itself: a line that includes a layer is seen, other lines are not.
TEST(Layers, TheIncludeParserSeesProjectIncludesOnly) {
  EXPECT_EQ(included_layer("#include \"nn/module.h\""), "nn");
  EXPECT_EQ(included_layer("  #  include \"io/gguf.h\"  // why"), "io");
  EXPECT_EQ(included_layer("#include <vector>"), "");
  EXPECT_EQ(included_layer("// #include is mentioned here"), "");
}

}  // namespace
