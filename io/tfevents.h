// TensorBoard event files: the scalars `fitgrad train --report_to tensorboard` logs, written
// so that TensorBoard's own reader loads them (Note [TensorBoard event files] in tfevents.cpp
// has the byte layout). The encoders are pure functions, so tests compare their bytes with
// files TensorBoard's writer made (tests/golden/gen_tfevents_golden.py); TfEventsWriter puts
// their records in a file of its own in the log directory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fitgrad::io {

// (tag, value) pairs logged at one step, for example {"train/loss", 2.31}. Tags are UTF-8
// (TensorBoard groups them by the part before the first '/'); values are stored as float.
using Scalars = std::vector<std::pair<std::string, double>>;

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78) of n bytes.
uint32_t crc32c(const void* data, size_t n);
// The masked CRC-32C that TFRecord framing stores: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t masked_crc32c(const void* data, size_t n);

// One TFRecord: length, masked CRC of the length, `data`, masked CRC of `data`.
std::string tfevents_record(std::string_view data);
// The serialized Event that starts every event file: file_version "brain.Event:2".
std::string version_event(double wall_time);
// The serialized Event holding `values` as simple_value scalars at `step`.
std::string scalar_event(int64_t step, double wall_time, const Scalars& values);

// Seconds since the Unix epoch, the clock of an Event's wall_time.
double unix_time_now();

// Creates `directory` (and its parents) when missing, then the file
// "events.out.tfevents.<seconds, 10 digits>.<hostname>.<pid>.fitgrad" in it, whose first record
// is the version event at `wall_time`. When a writer of this process already made that name in
// the same second, the next free "...<pid>.<n>.fitgrad" (n = 1, 2, ...) is used instead.
// Every error names the path; one thread uses a writer at a time.
class TfEventsWriter {
 public:
  explicit TfEventsWriter(const std::string& directory, double wall_time = unix_time_now());
  TfEventsWriter(const TfEventsWriter&) = delete;
  TfEventsWriter& operator=(const TfEventsWriter&) = delete;
  ~TfEventsWriter();

  // Appends one Event with `values` and hands it to the kernel before returning, so a crash
  // of the process loses nothing written (Note [Event files survive a crash] in tfevents.cpp).
  void scalars(int64_t step, double wall_time, const Scalars& values);
  const std::string& path() const { return path_; }

 private:
  void append(std::string_view bytes);

  std::string path_;
  int fd_ = -1;
};

}  // namespace fitgrad::io
