// The golden-file reader (golden_file.h): a well-formed file round-trips, and each kind of
// malformation throws fitgrad::Error naming the file.
#include "tests/golden/golden_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "tensor/error.h"

namespace fitgrad::testing {
namespace {

// Writes an 8-byte length, `header` and `data` to a temporary file and returns its path.
std::string write_file(const std::string& name, const std::string& header, const std::string& data,
                       int64_t header_len = -1) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("fitgrad_golden_" + std::to_string(::getpid()) + "_" + name + ".gtb");
  std::ofstream out(path, std::ios::binary);
  const uint64_t len = header_len < 0 ? header.size() : uint64_t(header_len);
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header << data;
  return path.string();
}

std::string f32_bytes(std::vector<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

const char* kGoodHeader = R"({"format":"fitgrad-golden","version":1,"meta":{"eps":0.5},)"
                          R"("tensors":{"x":{"dtype":"f32","shape":[2,2],"offset":0,"nbytes":16},)"
                          R"("ids":{"dtype":"i64","shape":[],"offset":16,"nbytes":8}}})";

std::string good_data() {
  int64_t id = -100;
  std::string s = f32_bytes({1.5f, -2.f, 0.25f, 3.f});
  s.append(reinterpret_cast<const char*>(&id), 8);
  return s;
}

TEST(GoldenFile, ReadsTensorsAndMeta) {
  const std::string path = write_file("good", kGoodHeader, good_data());
  const GoldenFile f(path);
  std::filesystem::remove(path);
  EXPECT_EQ(f.names(), (std::vector<std::string>{"ids", "x"}));
  EXPECT_EQ(f.meta().at("eps"), 0.5);
  const Tensor x = f.tensor("x");
  EXPECT_EQ(x.shape(), (Shape{2, 2}));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1.5f, -2.f, 0.25f, 3.f}));
  const Tensor ids = f.tensor("ids");
  EXPECT_EQ(ids.dtype(), DType::i64);
  EXPECT_EQ(ids.dim(), 0);
  EXPECT_EQ(ids.item(), -100);
}

// Expects Error whose message starts with "[golden <path>]" and contains `what`.
void expect_bad(const std::string& path, const std::string& what, bool load_tensor = false) {
  try {
    const GoldenFile f(path);
    if (load_tensor) f.tensor("missing");
    ADD_FAILURE() << "no error for " << path;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[golden " + path + "]", 0), 0u) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
  std::error_code ignored;
  std::filesystem::remove(path, ignored);
}

TEST(GoldenFile, MalformedFilesThrowNamingTheFile) {
  expect_bad("/nonexistent/x.gtb", "cannot open");
  {
    const auto path = std::filesystem::temp_directory_path() /
                      ("fitgrad_golden_short_" + std::to_string(::getpid()) + ".gtb");
    std::ofstream(path, std::ios::binary) << "abc";
    expect_bad(path.string(), "too short");
  }
  expect_bad(write_file("hdrlen", kGoodHeader, good_data(), 1 << 20), "runs past the end");
  expect_bad(write_file("json", "{not json", ""), "not valid JSON");
  expect_bad(write_file("format", R"({"format":"other","version":1,"tensors":{}})", ""),
             "not a fitgrad golden file");
  expect_bad(write_file("version", R"({"format":"fitgrad-golden","version":7,"tensors":{}})", ""),
             "unsupported version");
  expect_bad(write_file("dtype",
                        R"({"format":"fitgrad-golden","version":1,"tensors":{"x":)"
                        R"({"dtype":"f64","shape":[1],"offset":0,"nbytes":8}}})",
                        std::string(8, '\0')),
             "unknown dtype 'f64'");
  expect_bad(write_file("nbytes",
                        R"({"format":"fitgrad-golden","version":1,"tensors":{"x":)"
                        R"({"dtype":"f32","shape":[3],"offset":0,"nbytes":8}}})",
                        std::string(12, '\0')),
             "needs 12");
  expect_bad(write_file("past",
                        R"({"format":"fitgrad-golden","version":1,"tensors":{"x":)"
                        R"({"dtype":"f32","shape":[4],"offset":8,"nbytes":16}}})",
                        std::string(16, '\0')),
             "runs past the 16-byte data section");
  expect_bad(
      write_file("entry",
                 R"({"format":"fitgrad-golden","version":1,"tensors":{"x":{"dtype":"f32"}}})", ""),
      "malformed entry");
  expect_bad(write_file("missing", kGoodHeader, good_data()), "no tensor named 'missing'", true);
}

}  // namespace
}  // namespace fitgrad::testing
