// What the memory page's tests share (tests/io/memviz_*_test.cpp, tests/apps/memviz_test.cpp):
// a scripted allocation sequence with marks, run on a private meta allocator by the fixture,
// and the page's embedded data parsed back.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/memviz/page.h"
#include "tensor/memory/caching_allocator.h"
#include "tensor/memory/raw_source.h"
#include "tensor/memory/scope.h"

namespace fitgrad::io::memviz_test {

using nlohmann::json;

inline constexpr int64_t MiB = 1024 * 1024;

// Two steps of a toy model: parameters, then per step activations, a temporary that makes
// the peak in step 2's forward, gradients (one adopted from a temporary by a retag) and
// optimizer state, with a mark for each phase.
inline void run_steps(CachingAllocator& a) {
  std::vector<Allocation> params, state;
  {
    CategoryScope cat(Category::parameter);
    for (int i = 0; i < 3; ++i) {
      LabelScope l(fmt::format("layers.{}.weight", i));
      params.push_back(a.allocate(size_t(4 + i) * MiB));
    }
  }
  std::vector<Allocation> grads;
  for (int step = 1; step <= 2; ++step) {
    a.mark(fmt::format("step {} / forward", step));
    std::vector<Allocation> acts;
    {
      CategoryScope cat(Category::activation);
      for (int i = 0; i < 3; ++i) {
        LabelScope l(fmt::format("layers.{}", i));
        OpScope op("matmul");
        acts.push_back(a.allocate(size_t(step) * 3 * MiB + 777));
      }
    }
    Allocation tmp;
    {
      CategoryScope cat(Category::temporary);
      OpScope op("softmax");
      tmp = a.allocate(size_t(step) * 9 * MiB);
    }
    a.free(tmp);
    a.mark(fmt::format("step {} / backward", step));
    for (int i = 2; i >= 0; --i) {
      a.free(acts[size_t(i)]);
      if (step > 1) continue;
      Allocation g;
      {
        CategoryScope cat(Category::temporary);
        g = a.allocate(size_t(4 + i) * MiB);
      }
      a.retag(g, Category::gradient, intern_label(fmt::format("layers.{}.weight.grad", i)));
      grads.push_back(g);
    }
    a.mark(fmt::format("step {} / optimizer", step));
    if (step == 1) {
      CategoryScope cat(Category::optimizer_state);
      LabelScope l("adam.exp_avg");
      state.push_back(a.allocate(5 * MiB));
    }
  }
  {
    CategoryScope cat(Category::data);
    LabelScope l("batch");
    state.push_back(a.allocate(64 * 1024));
  }
  // The live blocks stay: the snapshot at the end must show them.
}

// 3000 small temporary blocks, one in three freed as it goes: a trace of thousands of events
// after run_steps. The blocks still live are returned, for the caller to free.
inline std::vector<Allocation> small_temporaries(CachingAllocator& a) {
  std::vector<Allocation> live;
  CategoryScope cat(Category::temporary);
  for (int i = 0; i < 3000; ++i) {
    live.push_back(a.allocate(size_t(1 + i % 7) * 4096));
    if (i % 3 == 2) {
      a.free(live.front());
      live.erase(live.begin());
    }
  }
  return live;
}

class MemvizTest : public ::testing::Test {
 protected:
  MemvizTest() : a_(Device::meta(), make_virtual_source()) { run_steps(a_); }

  std::filesystem::path temp_path(const std::string& name) const {
    return std::filesystem::temp_directory_path() /
           fmt::format("fitgrad_memviz_{}_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name(), name);
  }
  void write(const std::filesystem::path& p, const std::string& text) const {
    std::ofstream(p, std::ios::binary) << text;
  }

  CachingAllocator a_;
};

// The JSON the page embeds, parsed back.
inline json page_data(const std::string& page) {
  const std::string open = fmt::format("<script type=\"application/json\" id=\"{}\">", kPageDataId);
  const size_t begin = page.find(open);
  EXPECT_NE(begin, std::string::npos);
  const size_t start = begin + open.size();
  const size_t end = page.find("</script>", start);
  EXPECT_NE(end, std::string::npos);
  return json::parse(page.substr(start, end - start));
}

// The ledger's bytes per category at the peak.
inline std::map<std::string, int64_t> peak_by_category(const json& peak) {
  std::map<std::string, int64_t> out;
  for (const json& c : peak["by_category"]) out[c["category"]] = c["bytes"].get<int64_t>();
  return out;
}

}  // namespace fitgrad::io::memviz_test
