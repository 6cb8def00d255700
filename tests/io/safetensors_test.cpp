// safetensors: byte-identical round trips for every dtype (0-d and empty tensors too), the
// reference header layout, zero-copy reads, writes of strided tensors, and one crafted file
// per malformed-file error. SafetensorsGpt2.WriteForIndependentReader writes a GPT-2-sized
// checkpoint plus the expected checksums for tests/io/read_safetensors.py; it runs only
// from the ctest pair in tests/CMakeLists.txt, which sets FITGRAD_SAFETENSORS_CHECK_DIR.
#include "io/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>

#include "tensor/interrupt.h"
#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::io {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::StartsWith;

using fitgrad::testing::error_of;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A file as the format lays it out: 8-byte little-endian length, header, data.
std::string craft(const std::string& header, const std::string& data = "") {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

// Distinct, exactly representable values for every dtype (u8 and i8 included).
Tensor sample(const Shape& shape, DType dtype, int seed) {
  std::vector<double> values(size_t(fitgrad::numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = double((int(i) * 7 + seed) % 100) - 40;
  if (dtype == DType::u8) {
    for (double& v : values) v += 40;
  }
  return Tensor::from_vector(values, shape, dtype);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ca = a.contiguous(), cb = b.contiguous();
  return ca.dtype() == cb.dtype() && ca.shape() == cb.shape() &&
         (ca.nbytes() == 0 || std::memcmp(ca.data_ptr(), cb.data_ptr(), ca.nbytes()) == 0);
}

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("fitgrad_safetensors_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  fs::path dir_;
};

TEST_F(SafetensorsTest, RoundTripIsByteIdenticalForEveryDType) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  int seed = 0;
  for (DType dt : kAllDTypes) {
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{3}, Shape{2, 3}, Shape{2, 0, 4}}) {
      tensors.emplace_back(fmt::format("{}.{}", dtype_name(dt), shape_str(shape)),
                           sample(shape, dt, seed++));
    }
  }
  const std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "é \"quoted\"\n"}};
  save_safetensors(path("a.safetensors"), tensors, meta);

  const SafetensorsFile file = SafetensorsFile::open(path("a.safetensors"));
  EXPECT_EQ(file.metadata(), meta);
  ASSERT_EQ(file.entries().size(), tensors.size());
  uint64_t offset = 0;
  std::vector<std::pair<std::string, Tensor>> again;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const SafetensorsEntry& e = file.entries()[i];
    SCOPED_TRACE(e.name);
    EXPECT_EQ(e.name, tensors[i].first);  // data order is the order written
    EXPECT_EQ(e.dtype, tensors[i].second.dtype());
    EXPECT_EQ(e.shape, tensors[i].second.shape());
    EXPECT_EQ(e.begin, offset);
    offset = e.end;
    EXPECT_TRUE(same_bytes(file.tensor(e.name), tensors[i].second));
    again.emplace_back(e.name, file.tensor(e.name));
  }
  save_safetensors(path("b.safetensors"), again, file.metadata());
  EXPECT_EQ(read_bytes(path("a.safetensors")), read_bytes(path("b.safetensors")));

  const std::map<std::string, Tensor> all = file.tensors();
  EXPECT_EQ(all.size(), tensors.size());
  EXPECT_TRUE(same_bytes(all.at("i8.(2, 3)"), tensors[6 * 5 + 3].second));
}

TEST_F(SafetensorsTest, EmptyFileAndMetadataOnlyRoundTrip) {
  for (const auto& meta :
       {std::map<std::string, std::string>{}, std::map<std::string, std::string>{{"k", "v"}}}) {
    save_safetensors(path("e.safetensors"), {}, meta);
    const SafetensorsFile file = SafetensorsFile::open(path("e.safetensors"));
    EXPECT_TRUE(file.entries().empty());
    EXPECT_EQ(file.metadata(), meta);
    save_safetensors(path("f.safetensors"), {}, file.metadata());
    EXPECT_EQ(read_bytes(path("e.safetensors")), read_bytes(path("f.safetensors")));
  }
}

// Note [Header layout] in safetensors.cpp: the bytes the reference implementation writes
// for {"a": [1.0, 2.0]} with metadata {"format": "pt"}.
TEST_F(SafetensorsTest, WritesTheReferenceLayout) {
  save_safetensors(path("r.safetensors"), {{"a", Tensor::from_vector<float>({1, 2}, {2})}},
                   {{"format", "pt"}});
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::array<float, 2> data = {1, 2};
  EXPECT_EQ(read_bytes(path("r.safetensors")),
            craft(header, std::string(reinterpret_cast<const char*>(data.data()), 8)));
  EXPECT_EQ(read_bytes(path("r.safetensors")).size() % 8, 0u);
}

TEST_F(SafetensorsTest, TensorsViewTheMappingWithoutCopying) {
  save_safetensors(path("z.safetensors"),
                   {{"w", sample({4, 5}, DType::f32, 1)}, {"b", sample({5}, DType::bf16, 2)}});
  const std::string before = read_bytes(path("z.safetensors"));
  Tensor w;
  {
    const SafetensorsFile file = SafetensorsFile::open(path("z.safetensors"));
    w = file.tensor("w");
    const auto* p = static_cast<const std::byte*>(w.data_ptr());
    EXPECT_GE(p, file.mapped_data());
    EXPECT_LE(p + w.nbytes(), file.mapped_data() + file.mapped_size());
    EXPECT_FALSE(w.storage()->from_allocator());
    const Tensor b = file.tensor("b");
    EXPECT_GE(static_cast<const std::byte*>(b.data_ptr()), file.mapped_data());
  }
  // The file object is gone; the tensor keeps the mapping alive, and writes stay private.
  EXPECT_TRUE(same_bytes(w, sample({4, 5}, DType::f32, 1)));
  w.fill_(3.0);
  EXPECT_EQ(w.at({3, 4}), 3.0);
  EXPECT_EQ(read_bytes(path("z.safetensors")), before);
}

// Note [Dropping loaded pages]: a tensor whose pages were dropped reads the file's bytes
// again (several pages long, so whole pages are dropped), and so does its neighbour; a
// private write into dropped pages is what a caller must not make, and it is indeed lost.
TEST_F(SafetensorsTest, DroppedPagesReadTheFileAgain) {
  const Tensor big = sample({3, 4096}, DType::f32, 5), next = sample({7}, DType::bf16, 6);
  save_safetensors(path("d.safetensors"), {{"big", big}, {"next", next}});
  const SafetensorsFile file = SafetensorsFile::open(path("d.safetensors"));
  Tensor view = file.tensor("big");
  ASSERT_TRUE(same_bytes(view, big));
  file.drop_pages("big");
  EXPECT_TRUE(same_bytes(view, big));
  EXPECT_TRUE(same_bytes(file.tensor("next"), next));
  view.fill_(7.0);  // a private copy of the written pages
  file.drop_pages("big");
  EXPECT_TRUE(same_bytes(file.tensor("big").narrow(1, 1024, 2048), big.narrow(1, 1024, 2048)));
  fitgrad::testing::expect_error([&] { file.drop_pages("none"); }, "[safetensors",
                                 "no tensor named 'none'");
}

// Saving over the file a model was loaded from: the rename leaves the old mapping (and
// the tensors over it) intact, and the new file holds the new values.
TEST_F(SafetensorsTest, SavingOverTheMappedFileIsSafe) {
  save_safetensors(path("o.safetensors"), {{"w", sample({3, 3}, DType::f32, 1)}});
  const SafetensorsFile file = SafetensorsFile::open(path("o.safetensors"));
  const Tensor w = file.tensor("w");
  Tensor updated = w.clone();
  updated.fill_(2.0);
  save_safetensors(path("o.safetensors"), {{"w", updated}, {"b", w.select(0, 0)}});
  EXPECT_TRUE(same_bytes(w, sample({3, 3}, DType::f32, 1)));
  const SafetensorsFile reread = SafetensorsFile::open(path("o.safetensors"));
  EXPECT_TRUE(same_bytes(reread.tensor("w"), updated));
  EXPECT_TRUE(same_bytes(reread.tensor("b"), w.select(0, 0)));
}

// A signal stops a write (as `export` writes a model folder, issue 58): the file being
// replaced keeps its old contents and no temporary file is left (Note [Interruption points]).
TEST_F(SafetensorsTest, ASignalStopsAWriteAndKeepsTheOldFile) {
  const Tensor old = sample({3, 3}, DType::f32, 1), big = sample({256, 1024}, DType::f32, 2);
  save_safetensors(path("o.safetensors"), {{"w", old}});
  {
    const InterruptScope scope;
    note_interrupt(SIGINT);
    EXPECT_THROW(save_safetensors(path("o.safetensors"), {{"w", big}}), Interrupted);
    clear_interrupt();
  }
  EXPECT_TRUE(same_bytes(SafetensorsFile::open(path("o.safetensors")).tensor("w"), old));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

// The format does not align tensors; a misaligned one is copied, with the same values.
TEST_F(SafetensorsTest, MisalignedTensorIsCopied) {
  const float value = 1.5f;
  const std::string data = "\x07" + std::string(reinterpret_cast<const char*>(&value), 4);
  write_bytes(path("m.safetensors"),
              craft(R"({"u":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                    R"("f":{"dtype":"F32","shape":[],"data_offsets":[1,5]}})",
                    data));
  const SafetensorsFile file = SafetensorsFile::open(path("m.safetensors"));
  EXPECT_EQ(file.tensor("u").item(), 7.0);
  const Tensor f = file.tensor("f");
  EXPECT_EQ(f.item(), 1.5);
  EXPECT_TRUE(f.storage()->from_allocator());
  EXPECT_EQ(f.dim(), 0);
}

TEST_F(SafetensorsTest, StridedTensorsAreWrittenContiguously) {
  const Tensor base = sample({3, 4}, DType::f32, 3);
  const Tensor half = sample({2, 3, 4}, DType::f16, 4);
  const std::vector<std::pair<std::string, Tensor>> tensors = {
      {"transposed", base.transpose(0, 1)},
      {"sliced", base.slice(1, 1, 4, 2)},
      {"expanded", sample({1, 4}, DType::i64, 5).expand({3, 4})},
      {"offset_f16", half.select(0, 1).transpose(0, 1)},
  };
  save_safetensors(path("s.safetensors"), tensors);
  const SafetensorsFile file = SafetensorsFile::open(path("s.safetensors"));
  for (const auto& [name, t] : tensors) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(same_bytes(file.tensor(name), t));
  }
}

TEST_F(SafetensorsTest, BadTensorsAreRejectedAndTheOldFileSurvives) {
  const std::string target = path("keep.safetensors");
  save_safetensors(target, {{"a", sample({2}, DType::f32, 0)}});
  const std::string before = read_bytes(target);
  const Tensor ok = sample({2}, DType::f32, 1);
  const struct {
    std::vector<std::pair<std::string, Tensor>> tensors;
    const char* error;
  } rows[] = {
      {{{"ok", ok}, {"m", Tensor::empty({2}, DType::f32, Device::meta())}},
       "tensor 'm' is on meta, which has no bytes to write"},
      {{{"ok", ok}, {"u", Tensor()}}, "tensor 'u' is undefined"},
      {{{"ok", ok}, {"ok", ok}}, "tensor name 'ok' is given twice"},
      {{{"__metadata__", ok}}, "'__metadata__' is reserved"},
      {{{"bad\xff", ok}}, "is not valid UTF-8"},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.error);
    const std::string e = error_of([&] { save_safetensors(target, row.tensors); });
    EXPECT_THAT(e, StartsWith("[safetensors " + target + "] "));
    EXPECT_THAT(e, HasSubstr(row.error));
  }
  EXPECT_EQ(read_bytes(target), before);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
  EXPECT_THAT(error_of([&] { save_safetensors(path("no/such/dir.safetensors"), {}); }),
              HasSubstr("cannot create"));
}

TEST_F(SafetensorsTest, LookupErrors) {
  save_safetensors(path("l.safetensors"), {{"a", sample({2}, DType::f32, 0)}});
  const SafetensorsFile file = SafetensorsFile::open(path("l.safetensors"));
  EXPECT_THAT(error_of([&] { file.tensor("b"); }), HasSubstr("no tensor named 'b'"));
  EXPECT_THAT(error_of([&] { SafetensorsFile::open(path("missing.safetensors")); }),
              HasSubstr("cannot open: No such file or directory"));
  EXPECT_THAT(error_of([&] { SafetensorsFile::open(dir_.string()); }),
              HasSubstr("is not a regular file"));
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return fmt::format(R"("{}":{{"dtype":{},"shape":{},"data_offsets":{}}})", name, dtype, shape,
                     offsets);
}

// Note [Headers parse in linear time]: a header of 200,000 tensors parses (it took minutes
// when the parser's callback made it quadratic; bench/RESULTS.md has the times), and a
// repeated name among them is still found.
TEST_F(SafetensorsTest, TwoHundredThousandTensorsParse) {
  constexpr int kTensors = 200000;
  std::string header = "{";
  for (int i = 0; i < kTensors; ++i) {
    if (i > 0) header += ',';
    header +=
        entry(fmt::format("t.{}", i), "\"F32\"", "[1]", fmt::format("[{},{}]", 4 * i, 4 * i + 4));
  }
  header += "}";
  write_bytes(path("many.safetensors"), craft(header, std::string(4 * kTensors, '\0')));
  const SafetensorsFile file = SafetensorsFile::open(path("many.safetensors"));
  ASSERT_EQ(file.entries().size(), size_t(kTensors));
  EXPECT_EQ(file.tensor("t.199999").numel(), 1);
  header.back() = ',';
  header += entry("t.7", "\"F32\"", "[1]", fmt::format("[{},{}]", 4 * kTensors, 4 * kTensors + 4));
  header += "}";
  write_bytes(path("twice.safetensors"), craft(header, std::string(4 * kTensors + 4, '\0')));
  EXPECT_THAT(error_of([&] { SafetensorsFile::open(path("twice.safetensors")); }),
              HasSubstr("tensor name 't.7' appears twice in the header"));
}

// One crafted file per error class; each message names the file and the fault.
TEST_F(SafetensorsTest, MalformedFilesGiveTheirOwnErrors) {
  const std::string d8(8, '\x01'), d12(12, '\x02');
  const std::string a8 = entry("a", R"("F32")", "[2]", "[0,8]");
  std::string huge_length(8, '\0');
  const uint64_t huge = 100'000'001;
  std::memcpy(huge_length.data(), &huge, 8);
  const struct {
    const char* what;
    std::string bytes;
    std::string error;
  } rows[] = {
      {"short file", "\x01\x02\x03", "the file is 3 bytes, shorter than the 8-byte header length"},
      {"oversized header", huge_length + "{}", "header length 100000001 exceeds the limit"},
      {"header past the end", craft("{}").substr(0, 8) + "{",
       "header length 2 reaches past the end of the file (9 bytes)"},
      {"not JSON", craft(R"({"a":)"), "header is not valid JSON"},
      {"not UTF-8", craft("{\"\xff\":1}"), "header is not valid JSON"},
      {"not an object", craft("[1,2]"), "header does not start with '{': it must be a JSON object"},
      {"leading whitespace", craft(" {}"), "header does not start with '{'"},
      {"entry not an object", craft(R"({"a":5})"), "tensor 'a': the entry is a JSON number"},
      {"missing dtype", craft(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", d8),
       "tensor 'a': the entry has no \"dtype\""},
      {"missing shape", craft(R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", d8),
       "tensor 'a': the entry has no \"shape\""},
      {"missing data_offsets", craft(R"({"a":{"dtype":"F32","shape":[2]}})", d8),
       "tensor 'a': the entry has no \"data_offsets\""},
      {"dtype not a string", craft("{" + entry("a", "32", "[2]", "[0,8]") + "}", d8),
       "tensor 'a': \"dtype\" is a JSON number, not a string"},
      {"shape not an array", craft("{" + entry("a", R"("F32")", "2", "[0,8]") + "}", d8),
       "tensor 'a': \"shape\" is a JSON number, not an array"},
      {"shape not integers", craft("{" + entry("a", R"("F32")", "[2.0]", "[0,8]") + "}", d8),
       "tensor 'a': \"shape\" [2.0] holds 2.0, not an integer"},
      {"offsets not a pair", craft("{" + entry("a", R"("F32")", "[2]", "[8]") + "}", d8),
       "tensor 'a': \"data_offsets\" is [8], not an array of two non-negative integers"},
      {"negative offset", craft("{" + entry("a", R"("F32")", "[0]", "[-8,0]") + "}"),
       "\"data_offsets\" is [-8,0], not an array of two non-negative integers"},
      {"unknown dtype", craft("{" + entry("a", R"("F99")", "[2]", "[0,8]") + "}", d8),
       "tensor 'a': unknown dtype \"F99\""},
      {"unsupported F64", craft("{" + entry("a", R"("F64")", "[1]", "[0,8]") + "}", d8),
       "tensor 'a': dtype F64 is not supported"},
      {"unsupported BOOL", craft("{" + entry("a", R"("BOOL")", "[8]", "[0,8]") + "}", d8),
       "tensor 'a': dtype BOOL is not supported"},
      {"negative shape", craft("{" + entry("a", R"("F32")", "[2,-2]", "[0,8]") + "}", d8),
       "tensor 'a': \"shape\" [2,-2] has a negative size -2"},
      {"shape overflows int64",
       craft("{" + entry("a", R"("U8")", "[4294967296,4294967296]", "[0,8]") + "}", d8),
       "tensor 'a': \"shape\" [4294967296,4294967296] has more elements than fit in 64 bits"},
      {"shape size above int64",
       craft("{" + entry("a", R"("U8")", "[9223372036854775808]", "[0,8]") + "}", d8),
       "has more elements than fit in 64 bits"},
      {"byte size overflows",
       craft("{" + entry("a", R"("I64")", "[2305843009213693952]", "[0,8]") + "}", d8),
       "tensor 'a': shape (2305843009213693952) of I64 needs more bytes than fit in 64 bits"},
      {"end before begin", craft("{" + entry("a", R"("F32")", "[2]", "[8,0]") + "}", d8),
       "tensor 'a': data_offsets [8, 0] end before they begin"},
      {"past the data", craft("{" + entry("a", R"("F32")", "[4]", "[0,16]") + "}", d8),
       "tensor 'a': data_offsets [0, 16] reach past the data section of 8 bytes"},
      {"size mismatch", craft("{" + entry("a", R"("F32")", "[3]", "[0,8]") + "}", d8),
       "tensor 'a': data_offsets [0, 8] hold 8 bytes, but shape (3) of F32 needs 12"},
      {"overlap", craft("{" + a8 + "," + entry("b", R"("F32")", "[2]", "[4,12]") + "}", d12),
       "tensor 'b' (data_offsets [4, 12]) overlaps tensor 'a' (data_offsets [0, 8])"},
      {"gap between",
       craft("{" + entry("a", R"("F32")", "[1]", "[0,4]") + "," +
                 entry("b", R"("F32")", "[1]", "[8,12]") + "}",
             d12),
       "bytes [4, 8) of the data section belong to no tensor (between tensor 'a' and tensor "
       "'b')"},
      {"gap before", craft("{" + entry("a", R"("F32")", "[1]", "[4,8]") + "}", d8),
       "bytes [0, 4) of the data section belong to no tensor (before tensor 'a')"},
      {"trailing bytes", craft("{" + entry("a", R"("F32")", "[1]", "[0,4]") + "}", d8),
       "bytes [4, 8) of the data section belong to no tensor (after tensor 'a')"},
      {"data without tensors", craft("{}", d8),
       "bytes [0, 8) of the data section belong to no tensor (the header has none)"},
      {"duplicate name", craft("{" + a8 + "," + a8 + "}", d8),
       "tensor name 'a' appears twice in the header"},
      {"duplicate key",
       craft(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", d8),
       "key \"dtype\" appears twice in one object of the header"},
      {"metadata not an object", craft(R"({"__metadata__":[1]})"),
       "\"__metadata__\" is a JSON array, not an object of strings"},
      {"metadata value not a string", craft(R"({"__metadata__":{"k":1}})"),
       "\"__metadata__\" key 'k' holds a JSON number, not a string"},
  };
  int i = 0;
  for (const auto& row : rows) {
    SCOPED_TRACE(row.what);
    const std::string p = path(fmt::format("bad{}.safetensors", i++));
    write_bytes(p, row.bytes);
    const std::string e = error_of([&] { SafetensorsFile::open(p); });
    EXPECT_THAT(e, StartsWith("[safetensors " + p + "] "));
    EXPECT_THAT(e, HasSubstr(row.error));
  }
}

// Valid corner cases of the format that a strict reader must still accept.
TEST_F(SafetensorsTest, AcceptsValidCornerCases) {
  const struct {
    const char* what;
    std::string bytes;
    size_t entries;
  } rows[] = {
      {"empty header, no data", craft("{}"), 0},
      {"space padding", craft("{}      "), 0},
      {"unknown entry keys are ignored",
       craft(R"({"a":{"dtype":"I8","shape":[2],"data_offsets":[0,2],"extra":[1]}})", "ab"), 1},
      {"empty tensors share an offset",
       craft("{" + entry("e", R"("F32")", "[0]", "[4,4]") + "," +
                 entry("a", R"("F32")", "[]", "[0,4]") + "," +
                 entry("f", R"("BF16")", "[2,0]", "[4,4]") + "}",
             "abcd"),
       3},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(row.what);
    write_bytes(path("ok.safetensors"), row.bytes);
    const SafetensorsFile file = SafetensorsFile::open(path("ok.safetensors"));
    EXPECT_EQ(file.entries().size(), row.entries);
    for (const auto& [name, t] : file.tensors()) EXPECT_EQ(t.device(), Device::cpu());
  }
  // Data order, with ties in header order: a [0,4], then e and f at 4.
  const SafetensorsFile file = SafetensorsFile::open(path("ok.safetensors"));
  EXPECT_EQ(file.entries()[0].name, "a");
  EXPECT_EQ(file.entries()[1].name, "e");
  EXPECT_EQ(file.entries()[2].name, "f");
}

// ---- the independent-reader check (tests/CMakeLists.txt, read_safetensors.py) ----

uint32_t crc32(const void* data, size_t n) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xFFFFFFFFu;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

// What read_safetensors.py must find, computed from the tensors in memory (not from the
// file): a "__metadata__ key value" line per metadata pair (no spaces in them), then one
// line per tensor: name dtype dims crc32 and index=value samples, values printed exactly.
void write_expected(const std::string& path,
                    const std::vector<std::pair<std::string, Tensor>>& tensors,
                    const std::map<std::string, std::string>& metadata) {
  std::ofstream out(path);
  for (const auto& [key, value] : metadata) out << "__metadata__ " << key << ' ' << value << '\n';
  for (const auto& [name, t] : tensors) {
    const Tensor c = t.contiguous();
    out << name << ' ' << dtype_name(c.dtype()) << fmt::format(" [{}] ", fmt::join(c.shape(), ","))
        << crc32(c.nbytes() ? c.data_ptr() : nullptr, c.nbytes());
    const Tensor flat = c.reshape({c.numel()});
    for (int k = 0; k < 8 && c.numel() > 0; ++k) {
      const int64_t i = k == 7 ? c.numel() - 1 : c.numel() * k / 7;
      out << ' ' << i << '=' << fmt::format("{:.17g}", flat.at({i}));
    }
    out << '\n';
  }
}

// GPT-2 (124M) with Hugging Face's names and (in, out) Conv1D layout, all f32.
std::vector<std::pair<std::string, Tensor>> gpt2_tensors() {
  const int64_t v = 50257, t = 1024, c = 768;
  std::vector<std::pair<std::string, Shape>> shapes = {{"transformer.wte.weight", {v, c}},
                                                       {"transformer.wpe.weight", {t, c}}};
  for (int l = 0; l < 12; ++l) {
    const std::string h = fmt::format("transformer.h.{}.", l);
    for (const auto& [suffix, shape] :
         std::vector<std::pair<std::string, Shape>>{{"ln_1.weight", {c}},
                                                    {"ln_1.bias", {c}},
                                                    {"attn.c_attn.weight", {c, 3 * c}},
                                                    {"attn.c_attn.bias", {3 * c}},
                                                    {"attn.c_proj.weight", {c, c}},
                                                    {"attn.c_proj.bias", {c}},
                                                    {"ln_2.weight", {c}},
                                                    {"ln_2.bias", {c}},
                                                    {"mlp.c_fc.weight", {c, 4 * c}},
                                                    {"mlp.c_fc.bias", {4 * c}},
                                                    {"mlp.c_proj.weight", {4 * c, c}},
                                                    {"mlp.c_proj.bias", {c}}}) {
      shapes.emplace_back(h + suffix, shape);
    }
  }
  shapes.emplace_back("transformer.ln_f.weight", Shape{c});
  shapes.emplace_back("transformer.ln_f.bias", Shape{c});
  std::vector<std::pair<std::string, Tensor>> out;
  uint32_t state = 1;
  for (const auto& [name, shape] : shapes) {
    Tensor w = Tensor::empty(shape);
    float* p = w.data<float>();
    for (int64_t i = 0; i < w.numel(); ++i) {
      state = state * 1664525u + 1013904223u;  // an LCG: cheap, deterministic, all bits used
      p[i] = float(int32_t(state)) * 0x1p-33f;
    }
    out.emplace_back(name, w);
  }
  return out;
}

TEST(SafetensorsGpt2, WriteForIndependentReader) {
  const char* dir = std::getenv("FITGRAD_SAFETENSORS_CHECK_DIR");
  if (!dir) GTEST_SKIP() << "run through ctest (Safetensors.IndependentReaderWrite)";
  fs::create_directories(dir);
  const auto gpt2 = gpt2_tensors();
  int64_t params = 0;
  for (const auto& [name, t] : gpt2) params += t.numel();
  ASSERT_EQ(params, 124'439'808);
  const std::map<std::string, std::string> meta = {{"format", "pt"}};
  save_safetensors(fmt::format("{}/gpt2.safetensors", dir), gpt2, meta);
  write_expected(fmt::format("{}/gpt2.expected", dir), gpt2, meta);

  std::vector<std::pair<std::string, Tensor>> mixed;
  int seed = 0;
  for (DType dt : kAllDTypes) {
    for (const Shape& shape : {Shape{}, Shape{0}, Shape{5}, Shape{3, 7}}) {
      mixed.emplace_back(fmt::format("{}.{}", dtype_name(dt), seed), sample(shape, dt, seed));
      ++seed;
    }
  }
  mixed.emplace_back("f16.fraction",
                     Tensor::from_vector<float>({0.1f, -2.5e-5f, 65504}, {3}, DType::f16));
  mixed.emplace_back("bf16.fraction",
                     Tensor::from_vector<float>({0.1f, -3e38f, 1e-30f}, {3}, DType::bf16));
  save_safetensors(fmt::format("{}/mixed.safetensors", dir), mixed, {});
  write_expected(fmt::format("{}/mixed.expected", dir), mixed, {});
}

}  // namespace
}  // namespace fitgrad::io
