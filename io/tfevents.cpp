// TensorBoard event files (see tfevents.h): CRC-32C, TFRecord framing, the Event protobuf
// encoded by hand, and the writer that appends them to a file.
//
// Note [TensorBoard event files]
// An event file is a sequence of TFRecords, each
//   uint64 length (little-endian) | uint32 masked_crc32c(those 8 bytes) | data[length] |
//   uint32 masked_crc32c(data)
// where masked_crc32c(x) = rotate_right(crc32c(x), 15) + 0xa282ead8. Each record's data is
// one serialized tensorboard.Event (tensorflow/core/util/event.proto, summary.proto), of which
// fitgrad writes these fields:
//   Event   { double wall_time = 1; int64 step = 2;
//             oneof what { string file_version = 3; Summary summary = 5; } }
//   Summary { repeated Value value = 1; }
//   Value   { string tag = 1; oneof value { float simple_value = 2; } }
// The first Event holds wall_time and file_version "brain.Event:2" (from version 2 on,
// TensorBoard's Python reader no longer purges "orphaned" later steps when a step goes
// backwards); every later one holds a step, its wall time and a Summary with one Value per
// scalar. In protobuf's wire format a field is a varint key, (field number << 3) | wire type,
// then its payload:
//   wire type 0 (varint): int64 step, as the two's complement uint64 in 7-bit groups, low
//     group first, the high bit set on all but the last (a negative step takes 10 bytes);
//   wire type 1 (64-bit): double wall_time, 8 bytes little-endian;
//   wire type 2 (length-delimited): string file_version, Summary summary, Value value and
//     string tag, as a varint byte count and the bytes;
//   wire type 5 (32-bit): float simple_value, 4 bytes little-endian.
// So the keys are 0x09 wall_time, 0x10 step, 0x1a file_version, 0x2a summary, 0x0a value
// (in Summary), 0x0a tag and 0x15 simple_value (in Value). Protobuf's serializers write the
// fields in field-number order and, for proto3 fields outside a oneof, leave out a field at
// its default: wall_time whose bits are all zero (-0.0 is written), step 0 and an empty tag.
// A field in a oneof is written whenever set, so simple_value 0.0 is. The encoders below
// follow the same rules, which makes their bytes equal to TensorBoard's writer's
// (tests/golden/gen_tfevents_golden.py), not merely readable by it.
//
// Note [Event files survive a crash]
// The file is an unbuffered descriptor, and scalars() hands each Event to the kernel with
// write(2) before it returns: once returned, the record outlives the process (an abort, a
// SIGKILL, an out-of-memory kill). There is no fsync per step, which would wait for the disk
// at every logging step; a power loss can therefore cut the file short, and TensorBoard's
// readers stop at a truncated last record, keeping every record before it.
#include "io/tfevents.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "tensor/error.h"

namespace fitgrad::io {
namespace {

namespace fs = std::filesystem;

// table[b] is the CRC of the byte b alone, reflected (low bit first), poly 0x82F63B78.
constexpr std::array<uint32_t, 256> crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t crc = b;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (crc & 1 ? 0x82F63B78u : 0u);
    table[b] = crc;
  }
  return table;
}
constexpr std::array<uint32_t, 256> kCrc32cTable = crc32c_table();

void put_fixed(std::string& out, uint64_t bits, int nbytes) {
  for (int i = 0; i < nbytes; ++i) out.push_back(char((bits >> (8 * i)) & 0xFF));
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(char((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(char(v));
}

// Field keys (Note [TensorBoard event files]).
constexpr char kEventWallTime = 0x09;     // field 1, 64-bit
constexpr char kEventStep = 0x10;         // field 2, varint
constexpr char kEventFileVersion = 0x1a;  // field 3, length-delimited
constexpr char kEventSummary = 0x2a;      // field 5, length-delimited
constexpr char kSummaryValue = 0x0a;      // field 1, length-delimited
constexpr char kValueTag = 0x0a;          // field 1, length-delimited
constexpr char kValueSimpleValue = 0x15;  // field 2, 32-bit

void put_bytes_field(std::string& out, char key, std::string_view bytes) {
  out.push_back(key);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// wall_time (left out when its bits are zero) then step (left out when 0).
std::string event_head(int64_t step, double wall_time) {
  std::string out;
  const auto wall_bits = std::bit_cast<uint64_t>(wall_time);
  if (wall_bits != 0) {
    out.push_back(kEventWallTime);
    put_fixed(out, wall_bits, 8);
  }
  if (step != 0) {
    out.push_back(kEventStep);
    put_varint(out, uint64_t(step));
  }
  return out;
}

std::string errno_text() { return std::strerror(errno); }

std::string host_name() {
  std::array<char, 256> name{};
  if (::gethostname(name.data(), name.size() - 1) != 0 || name[0] == '\0') return "localhost";
  return name.data();
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) crc = kCrc32cTable[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  return std::rotr(crc32c(data, n), 15) + 0xa282ead8u;
}

std::string tfevents_record(std::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  put_fixed(out, data.size(), 8);
  put_fixed(out, masked_crc32c(out.data(), 8), 4);
  out.append(data);
  put_fixed(out, masked_crc32c(data.data(), data.size()), 4);
  return out;
}

std::string version_event(double wall_time) {
  std::string out = event_head(0, wall_time);
  put_bytes_field(out, kEventFileVersion, "brain.Event:2");
  return out;
}

std::string scalar_event(int64_t step, double wall_time, const Scalars& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    if (!tag.empty()) put_bytes_field(v, kValueTag, tag);
    v.push_back(kValueSimpleValue);
    put_fixed(v, std::bit_cast<uint32_t>(static_cast<float>(value)), 4);
    put_bytes_field(summary, kSummaryValue, v);
  }
  std::string out = event_head(step, wall_time);
  put_bytes_field(out, kEventSummary, summary);
  return out;
}

double unix_time_now() {
  const auto since_epoch = std::chrono::system_clock::now().time_since_epoch();
  return std::chrono::duration<double>(since_epoch).count();
}

TfEventsWriter::TfEventsWriter(const std::string& directory, double wall_time) {
  std::error_code ec;
  fs::create_directories(directory, ec);
  const bool made = !ec && fs::is_directory(directory, ec);
  FG_CHECK(made, "[tensorboard {}] cannot create the log directory ({}); give a writable directory",
           directory, ec ? ec.message() : "a file of that name exists");
  const std::string stem = fmt::format("{}/events.out.tfevents.{:010}.{}.{}", directory,
                                       int64_t(std::floor(wall_time)), host_name(), getpid());
  for (int n = 0; fd_ < 0; ++n) {
    path_ = n == 0 ? stem + ".fitgrad" : fmt::format("{}.{}.fitgrad", stem, n);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    FG_CHECK(fd_ >= 0 || errno == EEXIST,
             "[tensorboard {}] cannot create the event file: {}; give a writable directory", path_,
             errno_text());
  }
  try {
    append(tfevents_record(version_event(wall_time)));
  } catch (const Error&) {
    ::close(fd_);
    throw;
  }
}

TfEventsWriter::~TfEventsWriter() { ::close(fd_); }

void TfEventsWriter::scalars(int64_t step, double wall_time, const Scalars& values) {
  append(tfevents_record(scalar_event(step, wall_time, values)));
}

void TfEventsWriter::append(std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd_, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    FG_CHECK(n > 0, "[tensorboard {}] cannot write: {}", path_, errno_text());
    bytes.remove_prefix(size_t(n));
  }
}

}  // namespace fitgrad::io
