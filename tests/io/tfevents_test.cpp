// TensorBoard event files: CRC-32C against published check values, the Event encoding
// against protobuf bytes assembled by hand, and every record, and the whole file that
// TfEventsWriter writes, against tests/golden/tfevents/expected.tfevents, which TensorBoard's
// own record writer and protobuf classes made (tests/golden/gen_tfevents_golden.py).
#include "io/tfevents.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "tests/tensor/ops/op_harness.h"

namespace fitgrad::io {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;

using fitgrad::testing::error_of;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string hex(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) out += fmt::format("{:02x}", c);
  return out;
}

// n bytes of v, least significant first.
std::string little_endian(uint64_t v, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out.push_back(char((v >> (8 * i)) & 0xFF));
  return out;
}

std::string unhex(std::string_view text) {
  std::string out;
  for (size_t i = 0; i + 1 < text.size(); i += 2)
    out.push_back(char(std::stoi(std::string(text.substr(i, 2)), nullptr, 16)));
  return out;
}

struct GoldenEvent {
  int64_t step;
  double wall_time;
  Scalars values;
};

// VERSION_WALL_TIME and EVENTS of tests/golden/gen_tfevents_golden.py.
constexpr double kVersionWallTime = 1767225600.125;
const std::vector<GoldenEvent>& golden_events() {
  static const std::vector<GoldenEvent> events = {
      {0, 1767225601.5, {{"train/loss", 10.8125}, {"train/learning_rate", 0.0}}},
      {1,
       1767225602.0009766,
       {{"train/loss", 10.5}, {"train/learning_rate", 3e-4}, {"train/grad_norm", 123.456}}},
      {127, 1767225660.25, {{"train/loss", -2.5}, {"train/learning_rate", 1e-30}}},
      {128, 1767225661.0, {{"eval/loss", 0.1}, {"eval/perplexity", 3.0e38}}},
      {300,
       1767225700.75,
       {{"train/loss", std::numeric_limits<double>::quiet_NaN()}, {"train/grad_norm", 1e-40}}},
      {4294967296 + 5, 1767229200.5, {{"eval/loss", 1.0}, {"eval/accuracy", 0.999999}}},
  };
  return events;
}

std::string golden_file() { return read_bytes(FITGRAD_GOLDEN_DIR "/tfevents/expected.tfevents"); }

// The golden file's records, in order, as fitgrad encodes them.
std::vector<std::string> fitgrad_records() {
  std::vector<std::string> records = {tfevents_record(version_event(kVersionWallTime))};
  for (const auto& e : golden_events())
    records.push_back(tfevents_record(scalar_event(e.step, e.wall_time, e.values)));
  return records;
}

TEST(TfEventsCrc32c, MatchesPublishedCheckValues) {
  std::string ascending, descending;
  for (int i = 0; i < 32; ++i) {
    ascending.push_back(char(i));
    descending.push_back(char(31 - i));
  }
  // An iSCSI SCSI Read (10) command PDU (RFC 3720, B.4).
  const std::string read_pdu = unhex(
      "01c000000000000000000000000000001400000000000400000000140000001828000000000000000200"
      "000000000000");
  struct Row {
    const char* name;
    std::string bytes;
    uint32_t crc;
  };
  const Row rows[] = {
      {"empty", "", 0x00000000u},
      {"123456789 (the CRC catalogue's check)", "123456789", 0xE3069283u},
      {"32 zeros (RFC 3720 B.4)", std::string(32, '\0'), 0x8A9136AAu},
      {"32 0xFF (RFC 3720 B.4)", std::string(32, '\xFF'), 0x62A8AB43u},
      {"0..31 ascending (RFC 3720 B.4)", ascending, 0x46DD794Eu},
      {"31..0 descending (RFC 3720 B.4)", descending, 0x113FDB5Cu},
      {"SCSI Read (10) PDU (RFC 3720 B.4)", read_pdu, 0xD9963A56u},
  };
  for (const Row& r : rows) EXPECT_EQ(crc32c(r.bytes.data(), r.bytes.size()), r.crc) << r.name;
}

TEST(TfEventsCrc32c, MaskRotatesAndAddsTheConstant) {
  EXPECT_EQ(masked_crc32c("", 0), 0xa282ead8u);  // crc 0: only the constant
  // crc 0xE3069283 rotated right by 15 is 0x2507C60D.
  EXPECT_EQ(masked_crc32c("123456789", 9), 0x2507C60Du + 0xa282ead8u);
}

TEST(TfEventsRecord, FramesTheDataWithLengthAndMaskedCrcs) {
  for (const size_t n : {size_t(0), size_t(1), size_t(300), size_t(70000)}) {
    std::string data(n, '\0');
    for (size_t i = 0; i < n; ++i) data[i] = char(i * 7 + 1);
    const std::string record = tfevents_record(data);
    ASSERT_EQ(record.size(), n + 16) << n;
    const std::string length = little_endian(n, 8);
    EXPECT_EQ(hex(record.substr(0, 8)), hex(length)) << n;
    EXPECT_EQ(hex(record.substr(8, 4)), hex(little_endian(masked_crc32c(length.data(), 8), 4)));
    EXPECT_EQ(record.substr(12, n), data);
    EXPECT_EQ(hex(record.substr(12 + n)), hex(little_endian(masked_crc32c(data.data(), n), 4)));
  }
}

// Events assembled by hand from the wire format (Note [TensorBoard event files]), fields
// separated by spaces; each row's bytes are also what TensorBoard's protobuf classes
// serialize for that Event.
TEST(TfEventsEncoding, MatchesHandAssembledProtobuf) {
  struct Row {
    const char* name;
    std::string bytes;
    std::string expected;
  };
  const std::string version = "1a 0d 627261696e2e4576656e743a32";  // "brain.Event:2"
  const Row rows[] = {
      // wall_time 1.5 | step 300 (varint ac 02) | summary, 10 bytes: value, 8 bytes: tag "a",
      // simple_value 1.0f
      {"one scalar", scalar_event(300, 1.5, {{"a", 1.0}}),
       "09 000000000000f83f 10 ac02 2a 0a 0a 08 0a 01 61 15 0000803f"},
      {"version at wall time 0: no wall_time", version_event(0.0), version},
      {"wall time -0.0 is written", version_event(-0.0), "09 0000000000000080 " + version},
      {"step 0 left out, simple_value 0 written", scalar_event(0, 0.0, {{"b", 0.0}}),
       "2a 0a 0a 08 0a 01 62 15 00000000"},
      {"negative step: a 10-byte varint", scalar_event(-1, 0.0, {{"b", 0.0}}),
       "10 ffffffffffffffffff01 2a 0a 0a 08 0a 01 62 15 00000000"},
      {"empty tag left out", scalar_event(2, 0.0, {{"", 2.0}}), "10 02 2a 07 0a 05 15 00000040"},
      {"no values: an empty summary", scalar_event(2, 0.0, {}), "10 02 2a 00"},
  };
  for (const Row& r : rows) {
    std::string expected = r.expected;
    std::erase(expected, ' ');
    EXPECT_EQ(hex(r.bytes), expected) << r.name;
  }
}

TEST(TfEventsGolden, EveryRecordMatchesTensorBoards) {
  const std::string golden = golden_file();
  ASSERT_FALSE(golden.empty()) << "tests/golden/tfevents/expected.tfevents is missing";
  size_t at = 0;
  const auto records = fitgrad_records();
  for (size_t i = 0; i < records.size(); ++i) {
    EXPECT_EQ(hex(records[i]), hex(golden.substr(at, records[i].size()))) << "record " << i;
    at += records[i].size();
  }
  EXPECT_EQ(at, golden.size()) << "the golden file holds more records";
}

class TfEventsWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("fitgrad_tfevents_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(TfEventsWriterTest, WritesTensorBoardsFileByteForByte) {
  TfEventsWriter writer(dir_.string(), kVersionWallTime);
  for (const auto& e : golden_events()) writer.scalars(e.step, e.wall_time, e.values);
  EXPECT_EQ(hex(read_bytes(writer.path())), hex(golden_file()));
}

TEST_F(TfEventsWriterTest, NamesTheFileAsTensorBoardLooksForIt) {
  TfEventsWriter writer(dir_.string(), kVersionWallTime);
  EXPECT_EQ(fs::path(writer.path()).parent_path(), dir_);
  EXPECT_THAT(fs::path(writer.path()).filename().string(),
              MatchesRegex("events\\.out\\.tfevents\\.1767225600\\.[^/]+\\." +
                           std::to_string(::getpid()) + "\\.fitgrad"));
}

// Note [Event files survive a crash]: each Event is in the file when scalars() returns,
// before the writer closes it.
TEST_F(TfEventsWriterTest, EachEventIsInTheFileWhenScalarsReturns) {
  TfEventsWriter writer(dir_.string(), kVersionWallTime);
  const auto records = fitgrad_records();
  std::string expected = records[0];
  EXPECT_EQ(hex(read_bytes(writer.path())), hex(expected));
  for (size_t i = 0; i < golden_events().size(); ++i) {
    const auto& e = golden_events()[i];
    writer.scalars(e.step, e.wall_time, e.values);
    expected += records[i + 1];
    EXPECT_EQ(hex(read_bytes(writer.path())), hex(expected)) << "after event " << i;
  }
}

TEST_F(TfEventsWriterTest, CreatesMissingDirectories) {
  const fs::path nested = dir_ / "runs" / "a" / "tensorboard";
  TfEventsWriter writer(nested.string(), kVersionWallTime);
  EXPECT_TRUE(fs::is_regular_file(writer.path()));
  EXPECT_EQ(fs::path(writer.path()).parent_path(), nested);
}

TEST_F(TfEventsWriterTest, SecondWriterInTheSameSecondGetsItsOwnFile) {
  TfEventsWriter first(dir_.string(), kVersionWallTime);
  TfEventsWriter second(dir_.string(), kVersionWallTime + 0.5);
  EXPECT_NE(first.path(), second.path());
  EXPECT_THAT(second.path(), MatchesRegex(".*\\." + std::to_string(::getpid()) + "\\.1\\.fitgrad"));
  EXPECT_EQ(read_bytes(second.path()), tfevents_record(version_event(kVersionWallTime + 0.5)));
  EXPECT_EQ(read_bytes(first.path()), tfevents_record(version_event(kVersionWallTime)));
}

TEST_F(TfEventsWriterTest, UncreatableDirectoryIsNamed) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "not a directory";
  const std::string bad = (dir_ / "file" / "tensorboard").string();
  EXPECT_THAT(error_of([&] { TfEventsWriter writer(bad, kVersionWallTime); }),
              HasSubstr("[tensorboard " + bad + "] cannot create the log directory"));
  const std::string file = (dir_ / "file").string();
  EXPECT_THAT(error_of([&] { TfEventsWriter writer(file, kVersionWallTime); }),
              HasSubstr("[tensorboard " + file + "] cannot create the log directory"));
}

}  // namespace
}  // namespace fitgrad::io
