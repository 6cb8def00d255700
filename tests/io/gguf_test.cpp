// Tests of the GGUF reader (io/gguf.h), the block decoders (io/gguf_dequant.h) and
// the llama.cpp name mapping (nn/llama_names.h), on files built byte by byte here.
//
// The decoder tests build blocks by *encoding*: they draw quants and scales, pack them
// into bytes following the block layouts of the format, and compute each expected value
// in double from the spec formula (f16 fields through tests/tensor/f16_reference.h).
// Nothing here calls the decoders to get an expected value. Every malformed-file class has a row in a table
// that crafts its bytes and names the message it must produce.
#include "io/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "io/gguf_dequant.h"
#include "nn/llama_names.h"
#include "tensor/error.h"
#include "tests/tensor/f16_reference.h"

namespace fitgrad::io {
namespace {

// ---- byte building ----

constexpr uint32_t kMagic = 0x46554747;  // "GGUF" read as a little-endian u32

struct Bytes {
  std::vector<uint8_t> b;
  template <class T>
  Bytes& put(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    b.insert(b.end(), raw, raw + sizeof(T));
    return *this;
  }
  Bytes& str(std::string_view s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
    return *this;
  }
  Bytes& raw(const std::vector<uint8_t>& v) {
    b.insert(b.end(), v.begin(), v.end());
    return *this;
  }
};

struct TestTensor {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;
  std::vector<uint8_t> data;
  std::optional<uint64_t> offset;  // default: laid out in order, aligned
};

// Writes a GGUF file: header, the metadata entries as given (already encoded), the tensor
// infos, padding to `alignment`, and the data of each tensor at its aligned offset.
struct Builder {
  uint32_t version = 3;
  uint64_t alignment = 32;  // layout only; add a general.alignment entry to change the file's
  std::vector<Bytes> kvs;
  std::vector<TestTensor> tensors;
  std::optional<uint64_t> tensor_count, kv_count;

  Builder& kv(std::string_view key, uint32_t type, const std::function<void(Bytes&)>& value) {
    Bytes e;
    e.str(key).put<uint32_t>(type);
    value(e);
    kvs.push_back(std::move(e));
    return *this;
  }
  Builder& kv_u32(std::string_view key, uint32_t v) {
    return kv(key, 4, [&](Bytes& b) { b.put<uint32_t>(v); });
  }
  Builder& kv_str(std::string_view key, std::string_view v) {
    return kv(key, 8, [&](Bytes& b) { b.str(v); });
  }
  Builder& tensor(TestTensor t) {
    tensors.push_back(std::move(t));
    return *this;
  }

  std::vector<uint8_t> build() const {
    Bytes out;
    out.put<uint32_t>(kMagic).put<uint32_t>(version);
    out.put<uint64_t>(tensor_count.value_or(tensors.size()));
    out.put<uint64_t>(kv_count.value_or(kvs.size()));
    for (const auto& e : kvs) out.raw(e.b);
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const auto& t : tensors) {
      offsets.push_back(t.offset.value_or(next));
      next = (offsets.back() + t.data.size() + alignment - 1) / alignment * alignment;
    }
    for (size_t i = 0; i < tensors.size(); ++i) {
      const auto& t = tensors[i];
      out.str(t.name).put<uint32_t>(uint32_t(t.ne.size()));
      for (uint64_t d : t.ne) out.put<uint64_t>(d);
      out.put<uint32_t>(t.type).put<uint64_t>(offsets[i]);
    }
    const size_t data_start = (out.b.size() + alignment - 1) / alignment * alignment;
    out.b.resize(data_start, 0);
    for (size_t i = 0; i < tensors.size(); ++i) {
      const size_t at = data_start + offsets[i];
      if (at + tensors[i].data.size() > (size_t(1) << 24)) continue;  // a far offset: no data
      if (out.b.size() < at + tensors[i].data.size()) out.b.resize(at + tensors[i].data.size(), 0);
      std::memcpy(out.b.data() + at, tensors[i].data.data(), tensors[i].data.size());
    }
    return out.b;
  }
};

// The process id in the name: IsaPaths.* runs these tests in parallel processes, and one
// rewriting a file another has mapped ends that one with SIGBUS.
std::string write_file(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path =
      ::testing::TempDir() + "fitgrad_gguf_" + std::to_string(::getpid()) + "_" + name + ".gguf";
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

template <class T>
std::vector<uint8_t> le_bytes(const std::vector<T>& v) {
  std::vector<uint8_t> out(v.size() * sizeof(T));
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// Spec-side f16 helpers (tests/tensor/f16_reference.h, independent of tensor/half.h).
uint16_t f16_bits(float f) { return test::f16_encode_reference(f); }
double f16_value(uint16_t bits) { return test::f16_decode_reference(bits); }
void put_u16(std::vector<uint8_t>& b, size_t at, uint16_t v) {
  b[at] = uint8_t(v & 0xFF);
  b[at + 1] = uint8_t(v >> 8);
}

// A valid little file: one of each metadata scalar type, arrays, and two tensors.
Builder small_valid_file() {
  Builder b;
  b.kv_str("general.architecture", "llama")
      .kv_u32("llama.block_count", 2)
      .kv("u8", 0, [](Bytes& x) { x.put<uint8_t>(200); })
      .kv("i8", 1, [](Bytes& x) { x.put<int8_t>(-100); })
      .kv("u16", 2, [](Bytes& x) { x.put<uint16_t>(60000); })
      .kv("i16", 3, [](Bytes& x) { x.put<int16_t>(-30000); })
      .kv("i32", 5, [](Bytes& x) { x.put<int32_t>(-2000000000); })
      .kv("f32", 6, [](Bytes& x) { x.put<float>(0.25f); })
      .kv("bool", 7, [](Bytes& x) { x.put<uint8_t>(1); })
      .kv("u64", 10, [](Bytes& x) { x.put<uint64_t>(uint64_t(1) << 40); })
      .kv("i64", 11, [](Bytes& x) { x.put<int64_t>(-(int64_t(1) << 40)); })
      .kv("f64", 12, [](Bytes& x) { x.put<double>(-1.5); })
      .kv("strings", 9,
          [](Bytes& x) { x.put<uint32_t>(8).put<uint64_t>(3).str("a").str("").str("b c"); })
      .kv("ints", 9,
          [](Bytes& x) {
            x.put<uint32_t>(5).put<uint64_t>(3).put<int32_t>(-1).put<int32_t>(0).put<int32_t>(7);
          })
      .kv("floats", 9,
          [](Bytes& x) { x.put<uint32_t>(6).put<uint64_t>(2).put<float>(1.5f).put<float>(-2.f); })
      .kv("bools", 9,
          [](Bytes& x) { x.put<uint32_t>(7).put<uint64_t>(2).put<uint8_t>(0).put<uint8_t>(1); })
      .kv("nested", 9, [](Bytes& x) {
        x.put<uint32_t>(9).put<uint64_t>(2);
        x.put<uint32_t>(4).put<uint64_t>(1).put<uint32_t>(5);
        x.put<uint32_t>(8).put<uint64_t>(1).str("z");
      });
  std::vector<float> w(6);
  for (int i = 0; i < 6; ++i) w[size_t(i)] = float(i) - 2.5f;
  b.tensor({"w", {3, 2}, 0, le_bytes(w), {}});  // ne = [3, 2] -> shape (2, 3)
  std::vector<uint16_t> h = {f16_bits(1.f), f16_bits(-0.5f), f16_bits(65504.f), f16_bits(0.f)};
  b.tensor({"h", {4}, 1, le_bytes(h), {}});
  return b;
}

// ---- reading valid files ----

TEST(GgufRead, MetadataOfEveryTypeV2AndV3) {
  for (uint32_t version : {2u, 3u}) {
    Builder b = small_valid_file();
    b.version = version;
    const auto f = GgufFile::open(write_file("meta_v" + std::to_string(version), b.build()));
    EXPECT_EQ(f.version(), version);
    const auto& m = f.metadata();
    EXPECT_EQ(m.size(), 17u);
    EXPECT_EQ(m.entries()[0].first, "general.architecture");
    EXPECT_EQ(m.get_string("general.architecture"), "llama");
    EXPECT_EQ(m.get_u32("llama.block_count"), 2u);
    EXPECT_EQ(m.get("u8").type(), GgufType::u8);
    EXPECT_EQ(m.get_u32("u8"), 200u);
    EXPECT_EQ(m.get_i64("i8"), -100);
    EXPECT_EQ(m.get_u32("u16"), 60000u);
    EXPECT_EQ(m.get_i64("i16"), -30000);
    EXPECT_EQ(m.get_i64("i32"), -2000000000);
    EXPECT_EQ(m.get_f32("f32"), 0.25f);
    EXPECT_TRUE(m.get_bool("bool"));
    EXPECT_EQ(m.get_u64("u64"), uint64_t(1) << 40);
    EXPECT_EQ(m.get_i64("i64"), -(int64_t(1) << 40));
    EXPECT_EQ(m.get("f64").as_f64(), -1.5);
    EXPECT_EQ(m.get_string_array("strings"), (std::vector<std::string>{"a", "", "b c"}));
    EXPECT_EQ(m.get("strings").element_type(), GgufType::string);
    EXPECT_EQ(m.get_i32_array("ints"), (std::vector<int32_t>{-1, 0, 7}));
    EXPECT_EQ(m.get_f32_array("floats"), (std::vector<float>{1.5f, -2.f}));
    EXPECT_EQ(std::get<std::vector<bool>>(m.get("bools").data()), (std::vector<bool>{false, true}));
    const auto& nested = std::get<GgufValue::Array>(m.get("nested").data());
    ASSERT_EQ(nested.size(), 2u);
    EXPECT_EQ(nested[0].as_i32_array(), std::vector<int32_t>{5});
    EXPECT_EQ(nested[1].as_string_array(), std::vector<std::string>{"z"});
    EXPECT_EQ(m.get("ints").str(), "[i32 x 3] [-1, 0, 7]");
    EXPECT_EQ(m.get("general.architecture").str(), "\"llama\"");
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.data_offset() % 32, 0u);
  }
}

TEST(GgufRead, MetadataLookupErrorsNameFileAndKey) {
  const std::string path = write_file("lookup", small_valid_file().build());
  const auto f = GgufFile::open(path);
  const auto& m = f.metadata();
  auto expect = [&](const std::function<void()>& fn, const std::string& part) {
    try {
      fn();
      ADD_FAILURE() << "no error, wanted " << part;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("[gguf " + path + "] ", 0), 0u) << msg;
      EXPECT_NE(msg.find(part), std::string::npos) << msg;
    }
  };
  expect([&] { m.get_u32("missing.key"); }, "metadata key 'missing.key' is missing");
  expect([&] { m.get_u32("general.architecture"); },
         "'general.architecture' (string) is not a u32");
  expect([&] { m.get_u32("i8"); }, "negative");
  expect([&] { m.get_u32("u64"); }, "does not fit u32");
  expect([&] { m.get_string_array("ints"); }, "(array of i32) is not an array of strings");
  expect([&] { f.tensor("nope"); }, "no tensor named 'nope'");
}

TEST(GgufRead, TensorInfosShapesAndPlainTypes) {
  const std::string path = write_file("plain", small_valid_file().build());
  const auto f = GgufFile::open(path);
  ASSERT_EQ(f.tensors().size(), 2u);
  const auto& w = f.info("w");
  EXPECT_EQ(w.ne, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(w.shape(), (Shape{2, 3}));
  EXPECT_EQ(w.type_name(), "F32");
  EXPECT_EQ(w.nbytes, 24u);
  EXPECT_EQ(f.info("h").offset, 32u);  // the second tensor starts at the next 32-byte boundary

  Tensor t = f.tensor("w");
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f, 2.5f}));
  EXPECT_EQ(f.tensor("h").to_vector<float>(), (std::vector<float>{1.f, -0.5f, 65504.f, 0.f}));
  Tensor h16 = f.tensor("h", DType::f16);  // F16 -> f16 keeps the bits
  EXPECT_EQ(h16.dtype(), DType::f16);
  EXPECT_EQ(h16.data<Half>()[2].bits, f16_bits(65504.f));
  Tensor wb = f.tensor("w", DType::bf16);
  EXPECT_EQ(wb.dtype(), DType::bf16);
  EXPECT_EQ(wb.to_vector<float>(), t.to_vector<float>());
  EXPECT_THROW(f.tensor("w", DType::i32), Error);
}

TEST(GgufRead, MappedTensorIsZeroCopyAndPrivate) {
  const std::string path = write_file("mapped", small_valid_file().build());
  Tensor m;
  {
    const auto f = GgufFile::open(path);
    m = f.mapped_tensor("w");
    EXPECT_EQ(m.data_ptr(), static_cast<const void*>(f.tensor_data("w")));
    EXPECT_FALSE(m.storage()->from_allocator());
    EXPECT_EQ(f.mapped_tensor("h").dtype(), DType::f16);
  }  // the file object is gone; the tensor keeps the mapping alive
  EXPECT_EQ(m.at({1, 2}), 2.5);
  m.set({1, 2}, 42.0);  // copy-on-write: the file is untouched
  const auto again = GgufFile::open(path);
  EXPECT_EQ(again.tensor("w").at({1, 2}), 2.5);
}

TEST(GgufRead, CustomAlignment) {
  Builder b = small_valid_file();
  b.alignment = 64;
  b.kv_u32("general.alignment", 64);
  const auto f = GgufFile::open(write_file("align64", b.build()));
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.info("h").offset, 64u);
  EXPECT_EQ(f.tensor("h").to_vector<float>(), (std::vector<float>{1.f, -0.5f, 65504.f, 0.f}));
}

TEST(GgufRead, EmptyFileWithNoTensors) {
  Builder b;
  const auto f = GgufFile::open(write_file("empty", b.build()));
  EXPECT_EQ(f.tensors().size(), 0u);
  EXPECT_EQ(f.metadata().size(), 0u);
}

// 200,000 tensor infos read in linear time (issue 31; bench/RESULTS.md has the times).
TEST(GgufRead, TwoHundredThousandTensors) {
  constexpr int kTensors = 200000;
  Builder b;
  for (int i = 0; i < kTensors; ++i)
    b.tensors.push_back({"t." + std::to_string(i), {8}, 0, std::vector<uint8_t>(32, 0), {}});
  const auto f = GgufFile::open(write_file("many", b.build()));
  ASSERT_EQ(f.tensors().size(), size_t(kTensors));
  EXPECT_EQ(f.tensors().back().name, "t.199999");
}

// ---- malformed files ----

struct BadFile {
  const char* name;
  std::function<std::vector<uint8_t>()> bytes;
  const char* message;  // a part of the expected message
};

std::vector<uint8_t> patched(std::vector<uint8_t> b, size_t at, const std::vector<uint8_t>& v) {
  std::memcpy(b.data() + at, v.data(), v.size());
  return b;
}

std::vector<uint8_t> one_tensor(TestTensor t, uint64_t alignment = 32) {
  Builder b;
  b.alignment = alignment;
  b.tensor(std::move(t));
  return b.build();
}

std::vector<uint8_t> f32_data(size_t n) { return std::vector<uint8_t>(4 * n, 0); }

const std::vector<BadFile>& bad_files() {
  static const std::vector<BadFile> rows = {
      {"short_header", [] { return std::vector<uint8_t>{'G', 'G', 'U', 'F', 3, 0, 0}; },
       "truncated: the header needs 24 bytes, the file has 7"},
      {"bad_magic",
       [] {
         return patched(small_valid_file().build(), 0, {'G', 'G', 'M', 'L'});
       },
       "bad magic 'GGML'"},
      {"version_1",
       [] {
         Builder b = small_valid_file();
         b.version = 1;
         return b.build();
       },
       "unsupported version 1"},
      {"version_4",
       [] {
         Builder b = small_valid_file();
         b.version = 4;
         return b.build();
       },
       "unsupported version 4"},
      {"big_endian",
       [] {
         Builder b = small_valid_file();
         b.version = 0x03000000;
         return b.build();
       },
       "a big-endian file"},
      {"absurd_tensor_count",
       [] {
         Builder b = small_valid_file();
         b.tensor_count = uint64_t(1) << 62;
         return b.build();
       },
       "tensor count 4611686018427387904 is impossible"},
      {"absurd_kv_count",
       [] {
         Builder b = small_valid_file();
         b.kv_count = ~uint64_t(0);
         return b.build();
       },
       "metadata count 18446744073709551615 is impossible"},
      {"kv_count_past_entries",
       [] {
         Bytes b;  // two entries announced; the second key's length is all ones
         b.put<uint32_t>(kMagic).put<uint32_t>(3).put<uint64_t>(0).put<uint64_t>(2);
         b.str("a").put<uint32_t>(4).put<uint32_t>(1);
         b.b.resize(b.b.size() + 40, 0xFF);
         return b.b;
       },
       "of the key of metadata entry #1 at offset 41 runs past the end of the file"},
      {"key_length_past_eof",
       [] {
         Builder b;
         b.kvs.push_back(Bytes{}.put<uint64_t>(1000).put<uint32_t>(4));
         return b.build();
       },
       "string length 1000 of the key of metadata entry #0"},
      {"string_value_past_eof",
       [] {
         Builder b;
         b.kv("s", 8, [](Bytes& x) { x.put<uint64_t>(uint64_t(1) << 60); });
         return b.build();
       },
       "string length 1152921504606846976 of metadata key 's'"},
      {"unknown_value_type",
       [] {
         Builder b;
         b.kv("k", 13, [](Bytes& x) { x.put<uint64_t>(0); });
         return b.build();
       },
       "metadata key 'k' has unknown value type 13"},
      {"unknown_array_element_type",
       [] {
         Builder b;
         b.kv("arr", 9, [](Bytes& x) { x.put<uint32_t>(77).put<uint64_t>(1).put<uint64_t>(0); });
         return b.build();
       },
       "metadata key 'arr' is an array of unknown value type 77"},
      {"array_past_eof",
       [] {
         Builder b;
         b.kv("arr", 9,
              [](Bytes& x) { x.put<uint32_t>(5).put<uint64_t>(1000000).put<int32_t>(1); });
         return b.build();
       },
       "array of 1000000 i32 in metadata key 'arr'"},
      {"string_in_array_past_eof",
       [] {
         Builder b;
         b.kv("arr", 9,
              [](Bytes& x) { x.put<uint32_t>(8).put<uint64_t>(2).str("ok").put<uint64_t>(99); });
         return b.build();
       },
       "string length 99 of metadata key 'arr'"},
      {"arrays_nested_too_deep",
       [] {
         Builder b;
         b.kv("deep", 9, [](Bytes& x) {
           for (int i = 0; i < 40; ++i) x.put<uint32_t>(9).put<uint64_t>(1);
           x.put<uint32_t>(0).put<uint64_t>(0);
         });
         return b.build();
       },
       "nests arrays deeper than 16 levels"},
      {"duplicate_key",
       [] {
         Builder b;
         b.kv_u32("same", 1).kv_u32("same", 2);
         return b.build();
       },
       "duplicate metadata key 'same'"},
      {"alignment_not_power_of_two",
       [] {
         Builder b = small_valid_file();
         b.kv_u32("general.alignment", 24);
         return b.build();
       },
       "general.alignment 24 is not a power of two"},
      {"alignment_zero",
       [] {
         Builder b = small_valid_file();
         b.kv_u32("general.alignment", 0);
         return b.build();
       },
       "general.alignment 0 is not a power of two"},
      {"alignment_string",
       [] {
         Builder b = small_valid_file();
         b.kv_str("general.alignment", "32");
         return b.build();
       },
       "general.alignment is a string, not an integer"},
      {"tensor_name_past_eof",
       [] {
         Bytes b;
         b.put<uint32_t>(kMagic).put<uint32_t>(3).put<uint64_t>(1).put<uint64_t>(0);
         b.put<uint64_t>(500).put<uint32_t>(1).put<uint64_t>(1).put<uint32_t>(0).put<uint64_t>(0);
         return b.b;
       },
       "string length 500 of the name of tensor #0"},
      {"n_dims_5",
       [] {
         return one_tensor({"t5", {1, 1, 1, 1, 1}, 0, f32_data(1), {}});
       },
       "tensor 't5' has n_dims 5 (must be 1..4)"},
      {"n_dims_0",
       [] {
         return one_tensor({"t0", {}, 0, f32_data(1), {}});
       },
       "tensor 't0' has n_dims 0"},
      {"too_many_elements",
       [] {
         return one_tensor({"big", {uint64_t(1) << 21, uint64_t(1) << 20}, 0, f32_data(1), {}});
       },
       "tensor 'big' has dims [2097152, 1048576] (ne, fastest first): more than 2^40 elements"},
      {"dim_overflow",
       [] {
         return one_tensor({"ovf", {~uint64_t(0), 2}, 0, f32_data(1), {}});
       },
       "more than 2^40 elements"},
      {"unknown_ggml_type",
       [] {
         return one_tensor({"odd", {4}, 99, f32_data(4), {}});
       },
       "tensor 'odd' has unknown ggml type 99"},
      {"ne0_not_whole_blocks",
       [] {
         return one_tensor({"q", {48}, 3, std::vector<uint8_t>(40), {}});
       },
       "tensor 'q' (Q4_1) has ne[0] = 48, not a multiple of its block size 32"},
      {"misaligned_offset",
       [] {
         return one_tensor({"mis", {4}, 0, f32_data(4), 4});
       },
       "tensor 'mis' has offset 4, not a multiple of the alignment 32"},
      {"data_past_eof",
       [] {
         auto b = one_tensor({"cut", {8}, 0, f32_data(8), {}});
         b.pop_back();  // the last data byte
         return b;
       },
       "tensor 'cut' (32 bytes at offset 0 of the data section) lies outside the file"},
      {"offset_past_eof",
       [] {
         return one_tensor({"far", {1}, 0, f32_data(1), uint64_t(1) << 50});
       },
       "tensor 'far' (4 bytes at offset 1125899906842624"},
      {"duplicate_tensor",
       [] {
         Builder b;
         b.tensor({"dup", {1}, 0, f32_data(1), {}}).tensor({"dup", {1}, 0, f32_data(1), {}});
         return b.build();
       },
       "duplicate tensor name 'dup'"},
  };
  return rows;
}

TEST(GgufMalformed, EachFaultHasItsError) {
  for (const BadFile& row : bad_files()) {
    SCOPED_TRACE(row.name);
    const std::string path = write_file(std::string("bad_") + row.name, row.bytes());
    try {
      GgufFile::open(path);
      ADD_FAILURE() << row.name << ": opened without error";
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("[gguf " + path + "] ", 0), 0u) << msg;
      EXPECT_NE(msg.find(row.message), std::string::npos) << msg;
    }
  }
}

// Every strict prefix of a valid file (cut in the header, a key, a value, an array, a
// tensor info, the padding or the data) is refused with a "[gguf <path>]" error.
TEST(GgufMalformed, TruncatedAnywhere) {
  const auto full = small_valid_file().build();
  ASSERT_NO_THROW(GgufFile::open(write_file("full", full)));
  // One file cut shorter step by step (rewriting it for each prefix is slow on ext4).
  const std::string path = write_file("prefix", full);
  for (size_t n = full.size(); n-- > 0;) {
    std::filesystem::resize_file(path, n);
    try {
      GgufFile::open(path);
      ADD_FAILURE() << "a " << n << "-byte prefix of " << full.size() << " bytes opened";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("[gguf " + path + "] ", 0), 0u) << e.what();
    }
  }
}

TEST(GgufMalformed, MissingFileAndFolder) {
  EXPECT_THROW(GgufFile::open(::testing::TempDir() + "no_such_file.gguf"), Error);
  try {
    GgufFile::open(::testing::TempDir());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a regular file"), std::string::npos);
  }
}

TEST(GgufMalformed, UndecodableTypeNamesTensorAndType) {
  // Q5_K is known (so the file opens) but not decoded.
  const std::string path = write_file(
      "q5k", one_tensor({"blk.0.ffn_up.weight", {256}, 13, std::vector<uint8_t>(176), {}}));
  const auto f = GgufFile::open(path);
  EXPECT_EQ(f.info("blk.0.ffn_up.weight").type_name(), "Q5_K");
  try {
    f.tensor("blk.0.ffn_up.weight");
    ADD_FAILURE();
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("[gguf " + path + "] ", 0), 0u) << msg;
    EXPECT_NE(msg.find("tensor 'blk.0.ffn_up.weight' has ggml type Q5_K"), std::string::npos)
        << msg;
  }
  EXPECT_THROW(f.mapped_tensor("blk.0.ffn_up.weight"), Error);
}

// ---- block decoders against hand-built blocks ----

struct Encoded {
  std::vector<uint8_t> bytes;
  std::vector<double> expected;
};

std::mt19937& rng() {
  static std::mt19937 g(1234);
  return g;
}
int rand_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng()); }
uint16_t rand_f16(float lo, float hi) {
  return f16_bits(std::uniform_real_distribution<float>(lo, hi)(rng()));
}

// Q8_0: f16 d | i8 q[32]; x = d * q.
Encoded encode_q8_0(int blocks) {
  Encoded e;
  for (int b = 0; b < blocks; ++b) {
    std::vector<uint8_t> blk(34);
    const uint16_t d = rand_f16(-0.1f, 0.1f);
    put_u16(blk, 0, d);
    for (int i = 0; i < 32; ++i) {
      const int q = i == 0 ? -128 : i == 1 ? 127 : rand_int(-128, 127);
      blk[size_t(2 + i)] = uint8_t(int8_t(q));
      e.expected.push_back(f16_value(d) * q);
    }
    e.bytes.insert(e.bytes.end(), blk.begin(), blk.end());
  }
  return e;
}

// Q4_0 and Q4_1: f16 d [| f16 m] | 16 bytes; value i < 16 is the low nibble of byte i,
// value i >= 16 the high nibble of byte i - 16. Q4_0: x = d (q - 8); Q4_1: x = d q + m.
Encoded encode_q4(int blocks, bool with_min) {
  Encoded e;
  const size_t head = with_min ? 4 : 2;
  for (int b = 0; b < blocks; ++b) {
    std::vector<uint8_t> blk(head + 16, 0);
    const uint16_t d = rand_f16(-0.2f, 0.2f);
    const uint16_t m = rand_f16(-1.f, 1.f);
    put_u16(blk, 0, d);
    if (with_min) put_u16(blk, 2, m);
    for (int i = 0; i < 32; ++i) {
      const int q = i == 0 ? 0 : i == 31 ? 15 : rand_int(0, 15);
      if (i < 16)
        blk[head + size_t(i)] |= uint8_t(q);
      else
        blk[head + size_t(i - 16)] |= uint8_t(q << 4);
      e.expected.push_back(with_min ? f16_value(d) * q + f16_value(m) : f16_value(d) * (q - 8));
    }
    e.bytes.insert(e.bytes.end(), blk.begin(), blk.end());
  }
  return e;
}

// Q4_K: f16 d | f16 dmin | 12 scale bytes | 128 nibble bytes. Sub-block s = v / 32 has a
// 6-bit scale sc[s] and min m[s]: bytes 0..3 = sc[0..3] | (sc[4..7] >> 4) << 6,
// bytes 4..7 = m[0..3] | (m[4..7] >> 4) << 6, bytes 8..11 = (sc[4..7] & 15) | (m[4..7] & 15) << 4.
// Value v: group g = v / 64, r = v % 64; r < 32 is the low nibble of qs[32 g + r], r >= 32
// the high nibble of qs[32 g + r - 32]. x = d sc q - dmin m.
Encoded encode_q4_k(int blocks) {
  Encoded e;
  for (int b = 0; b < blocks; ++b) {
    std::vector<uint8_t> blk(144, 0);
    const uint16_t d = rand_f16(0.f, 0.01f), dmin = rand_f16(0.f, 0.02f);
    put_u16(blk, 0, d);
    put_u16(blk, 2, dmin);
    int sc[8], m[8];
    for (int s = 0; s < 8; ++s) {
      sc[s] = s == 0 ? 63 : rand_int(0, 63);
      m[s] = s == 7 ? 63 : rand_int(0, 63);
    }
    for (int j = 0; j < 4; ++j) {
      blk[4 + size_t(j)] = uint8_t((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
      blk[8 + size_t(j)] = uint8_t((m[j] & 63) | ((m[j + 4] >> 4) << 6));
      blk[12 + size_t(j)] = uint8_t((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
    }
    for (int v = 0; v < 256; ++v) {
      const int q = rand_int(0, 15);
      const int g = v / 64, r = v % 64;
      if (r < 32)
        blk[16 + size_t(32 * g + r)] |= uint8_t(q);
      else
        blk[16 + size_t(32 * g + r - 32)] |= uint8_t(q << 4);
      const int s = v / 32;
      e.expected.push_back(f16_value(d) * sc[s] * q - f16_value(dmin) * m[s]);
    }
    e.bytes.insert(e.bytes.end(), blk.begin(), blk.end());
  }
  return e;
}

// Q6_K: ql[128] | qh[64] | i8 scales[16] | f16 d. Value v: half h = v / 128, w = v % 128,
// quarter k = w / 32, l = w % 32. Its low 4 bits are in ql[64 h + l + 32 (k % 2)] (the low
// nibble for k < 2, the high one for k >= 2), its high 2 bits at bit 2k of qh[32 h + l];
// its scale is scales[v / 16]. x = d scale (q - 32).
Encoded encode_q6_k(int blocks) {
  Encoded e;
  for (int b = 0; b < blocks; ++b) {
    std::vector<uint8_t> blk(210, 0);
    const uint16_t d = rand_f16(-0.001f, 0.001f);
    put_u16(blk, 208, d);
    int scales[16];
    for (int s = 0; s < 16; ++s) {
      scales[s] = s == 0 ? -128 : s == 1 ? 127 : rand_int(-128, 127);
      blk[192 + size_t(s)] = uint8_t(int8_t(scales[s]));
    }
    for (int v = 0; v < 256; ++v) {
      const int q = v == 0 ? 0 : v == 255 ? 63 : rand_int(0, 63);
      const int h = v / 128, w = v % 128, k = w / 32, l = w % 32;
      const size_t lo = size_t(64 * h + l + 32 * (k % 2));
      blk[lo] |= uint8_t(k < 2 ? (q & 15) : (q & 15) << 4);
      blk[128 + size_t(32 * h + l)] |= uint8_t((q >> 4) << (2 * k));
      e.expected.push_back(f16_value(d) * scales[v / 16] * (q - 32));
    }
    e.bytes.insert(e.bytes.end(), blk.begin(), blk.end());
  }
  return e;
}

// BF16: the top 16 bits of an f32.
Encoded encode_bf16(int n) {
  Encoded e;
  for (int i = 0; i < n; ++i) {
    const uint16_t bits = uint16_t(rand_int(0, 0xFFFF) & 0xBFFF);  // no inf/NaN exponents
    e.bytes.push_back(uint8_t(bits & 0xFF));
    e.bytes.push_back(uint8_t(bits >> 8));
    e.expected.push_back(double(std::bit_cast<float>(uint32_t(bits) << 16)));
  }
  return e;
}

struct DequantCase {
  const char* name;
  GgmlType type;
  int64_t block;
  std::function<Encoded(int blocks)> encode;
};

const std::vector<DequantCase>& dequant_cases() {
  static const std::vector<DequantCase> rows = {
      {"Q8_0", GgmlType::Q8_0, 32, encode_q8_0},
      {"Q4_0", GgmlType::Q4_0, 32, [](int n) { return encode_q4(n, false); }},
      {"Q4_1", GgmlType::Q4_1, 32, [](int n) { return encode_q4(n, true); }},
      {"Q4_K", GgmlType::Q4_K, 256, encode_q4_k},
      {"Q6_K", GgmlType::Q6_K, 256, encode_q6_k},
      {"BF16", GgmlType::BF16, 1, encode_bf16},
  };
  return rows;
}

void expect_close(const std::vector<float>& got, const std::vector<double>& want,
                  const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-6 * std::max(1.0, std::abs(want[i]))) << what << " value " << i;
}

TEST(GgufDequant, BlocksMatchTheSpecFormulas) {
  for (const auto& c : dequant_cases()) {
    SCOPED_TRACE(c.name);
    const int blocks = 3;
    const Encoded e = c.encode(blocks);
    std::vector<float> out(size_t(blocks * c.block));
    dequantize(c.type, e.bytes.data(), out.data(), int64_t(out.size()));
    expect_close(out, e.expected, c.name);
    const auto info = ggml_type_info(uint32_t(c.type));
    ASSERT_TRUE(info.has_value());
    EXPECT_EQ(info->name, c.name);
    EXPECT_EQ(info->block_size, c.block);
    EXPECT_EQ(int64_t(e.bytes.size()), blocks * info->type_size);
  }
}

// Through a file: two rows of blocks, shape reversed, and decoding into f16/bf16; the
// second tensor is long enough to cross the reader's decoding chunks.
TEST(GgufDequant, ThroughAFile) {
  for (const auto& c : dequant_cases()) {
    SCOPED_TRACE(c.name);
    const int64_t row = c.block == 256 ? 512 : 64;  // values per row (ne[0])
    const Encoded small = c.encode(int(2 * row / c.block));
    const int64_t long_rows = (int64_t(1) << 16) * 3 / row / 2;  // 1.5 chunks
    const Encoded large = c.encode(int(long_rows * row / c.block));
    Builder b;
    b.tensor({"small", {uint64_t(row), 2}, uint32_t(c.type), small.bytes, {}});
    b.tensor({"large", {uint64_t(row), uint64_t(long_rows)}, uint32_t(c.type), large.bytes, {}});
    const auto f = GgufFile::open(write_file(std::string("dq_") + c.name, b.build()));
    Tensor t = f.tensor("small");
    EXPECT_EQ(t.shape(), (Shape{2, row}));
    expect_close(t.to_vector<float>(), small.expected, "small");
    expect_close(f.tensor("large").to_vector<float>(), large.expected, "large");
    // f16 / bf16 outputs are the f32 values rounded once.
    const auto as_f16 = f.tensor("large", DType::f16).to_vector<float>();
    const auto as_bf16 = f.tensor("large", DType::bf16).to_vector<float>();
    for (size_t i = 0; i < large.expected.size(); i += 97) {
      EXPECT_NEAR(as_f16[i], large.expected[i], 1e-3 * std::max(1e-2, std::abs(large.expected[i])));
      EXPECT_NEAR(as_bf16[i], large.expected[i],
                  8e-3 * std::max(1e-2, std::abs(large.expected[i])));
    }
  }
}

TEST(GgufDequant, TypeTable) {
  EXPECT_EQ(ggml_type_name(12), "Q4_K");
  EXPECT_EQ(ggml_type_name(99), "type 99");
  EXPECT_FALSE(ggml_type_info(4).has_value());  // retired Q4_2
  const auto q4k = *ggml_type_info(12);
  EXPECT_EQ(q4k.type_size, 2 + 2 + 12 + 128);
  const auto q6k = *ggml_type_info(14);
  EXPECT_EQ(q6k.type_size, 128 + 64 + 16 + 2);
  EXPECT_THROW(
      {
        float y[256];
        uint8_t x[176] = {};
        dequantize(GgmlType::Q5_K, x, y, 256);
      },
      Error);
}

// ---- llama.cpp names ----

TEST(GgufLlamaNames, MapsBothWays) {
  const std::vector<std::pair<std::string, std::string>> table = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
      {"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
      {"blk.7.attn_q.weight", "model.layers.7.self_attn.q_proj.weight"},
      {"blk.7.attn_k.weight", "model.layers.7.self_attn.k_proj.weight"},
      {"blk.7.attn_v.weight", "model.layers.7.self_attn.v_proj.weight"},
      {"blk.29.attn_output.weight", "model.layers.29.self_attn.o_proj.weight"},
      {"blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight"},
      {"blk.3.ffn_gate.weight", "model.layers.3.mlp.gate_proj.weight"},
      {"blk.3.ffn_up.weight", "model.layers.3.mlp.up_proj.weight"},
      {"blk.12.ffn_down.weight", "model.layers.12.mlp.down_proj.weight"},
      {"blk.1.attn_q.bias", "model.layers.1.self_attn.q_proj.bias"},
  };
  for (const auto& [gguf, hf] : table) {
    EXPECT_EQ(nn::llama_cpp_to_hf_name(gguf), hf);
    EXPECT_EQ(nn::hf_to_llama_cpp_name(hf), gguf);
  }
  for (const char* odd : {"rope_freqs.weight", "blk.x.attn_q.weight", "blk.1.attn_q",
                          "blk.1.unknown.weight", "blk..attn_q.weight", "blk.1.attn_q.scale"})
    EXPECT_FALSE(nn::llama_cpp_to_hf_name(odd).has_value()) << odd;
  EXPECT_FALSE(nn::hf_to_llama_cpp_name("model.layers.0.mlp.weight").has_value());
}

// convert_hf_to_gguf's permutation, from its definition: rows viewed as
// (n_head, 2, head_dim/2) have their last two axes swapped, so permuted row (h, i, j) of
// (n_head, head_dim/2, 2) is original row (h, j, i).
std::vector<float> forward_permute(const std::vector<float>& w, int64_t rows, int64_t cols,
                                   int64_t n_head) {
  const int64_t hd = rows / n_head, half = hd / 2;
  std::vector<float> out(w.size());
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t i = 0; i < half; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t c = 0; c < cols; ++c)
          out[size_t((h * hd + i * 2 + j) * cols + c)] =
              w[size_t((h * hd + j * half + i) * cols + c)];
  return out;
}

TEST(GgufLlamaNames, UnpermuteInvertsTheConverterPermutation) {
  struct Case {
    int64_t n_head, head_dim, cols;
  };
  for (const Case c : {Case{9, 64, 5}, Case{3, 64, 7}, Case{2, 4, 3}, Case{1, 2, 1}}) {
    const int64_t rows = c.n_head * c.head_dim;
    std::vector<float> w(static_cast<size_t>(rows * c.cols));
    for (size_t i = 0; i < w.size(); ++i) w[i] = float(i);
    const auto p = forward_permute(w, rows, c.cols, c.n_head);
    Tensor pt = Tensor::from_vector(p, {rows, c.cols});
    EXPECT_EQ(nn::unpermute_qk(pt, c.n_head).to_vector<float>(), w);
    EXPECT_EQ(nn::permute_qk(Tensor::from_vector(w, {rows, c.cols}), c.n_head).to_vector<float>(),
              p);
    EXPECT_EQ(nn::unpermute_qk(pt, c.n_head).shape(), (Shape{rows, c.cols}));
    // A bias (1-d) follows the same row order.
    std::vector<float> bias(static_cast<size_t>(rows));
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = float(i);
    EXPECT_EQ(nn::unpermute_qk(
                  Tensor::from_vector(forward_permute(bias, rows, 1, c.n_head), {rows}), c.n_head)
                  .to_vector<float>(),
              bias);
  }
  EXPECT_THROW(nn::unpermute_qk(Tensor::zeros({10, 4}), 3), Error);  // 10 rows, 3 heads
  EXPECT_THROW(nn::unpermute_qk(Tensor::zeros({9, 4}), 3), Error);   // odd head_dim
}

TEST(GgufLlamaNames, LoadLlamaGgufRenamesAndUnpermutes) {
  const int64_t n_head = 2, n_kv = 1, hd = 4, dim = n_head * hd;
  auto iota = [](int64_t n, float base) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = base + float(i);
    return v;
  };
  const auto q = iota(dim * dim, 0.f);           // HF order, (dim, dim)
  const auto k = iota(n_kv * hd * dim, 1000.f);  // (n_kv * hd, dim)
  Builder b;
  b.kv_str("general.architecture", "llama")
      .kv_u32("llama.attention.head_count", uint32_t(n_head))
      .kv_u32("llama.attention.head_count_kv", uint32_t(n_kv));
  b.tensor({"blk.0.attn_q.weight",
            {uint64_t(dim), uint64_t(dim)},
            0,
            le_bytes(forward_permute(q, dim, dim, n_head)),
            {}});
  b.tensor({"blk.0.attn_k.weight",
            {uint64_t(dim), uint64_t(n_kv * hd)},
            0,
            le_bytes(forward_permute(k, n_kv * hd, dim, n_kv)),
            {}});
  b.tensor({"output_norm.weight", {uint64_t(dim)}, 0, le_bytes(iota(dim, 1.f)), {}});
  b.tensor({"rope_freqs.weight", {uint64_t(hd / 2)}, 0, le_bytes(iota(hd / 2, 1.f)), {}});
  const auto f = GgufFile::open(write_file("llama_small", b.build()));
  const auto tensors = nn::load_llama_gguf(f);
  ASSERT_EQ(tensors.size(), 3u);
  EXPECT_EQ(tensors[0].first, "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(tensors[0].second.to_vector<float>(), q);
  EXPECT_EQ(tensors[1].first, "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(tensors[1].second.shape(), (Shape{n_kv * hd, dim}));
  EXPECT_EQ(tensors[1].second.to_vector<float>(), k);
  EXPECT_EQ(tensors[2].first, "model.norm.weight");
}

}  // namespace
}  // namespace fitgrad::io
