// libFuzzer target for the safetensors reader and writer (io/safetensors.cpp). Each
// input is written to a scratch file (fuzz/temp_file.h) and opened like a checkpoint.
// fitgrad::Error from open() is the expected outcome for malformed input; anything else (a
// crash, a sanitizer report, InternalError, another exception) is a bug. A file that opens must give a tensor for every entry, every
// byte of which is read (so AddressSanitizer sees any view that strays outside the
// mapping), and must survive a write and a re-read unchanged.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/temp_file.h"
#include "io/safetensors.h"
#include "tensor/error.h"

namespace {

volatile uint8_t sink;  // keeps the byte reads from being optimised away

// A file that opens must write back as the same tensors: the same entries and metadata,
// and the same data section byte for byte (the entries cover it in data order). Any
// exception here is a bug, so none is caught.
void check_round_trip(const fitgrad::io::SafetensorsFile& file) {
  std::vector<std::pair<std::string, fitgrad::Tensor>> tensors;
  for (const fitgrad::io::SafetensorsEntry& e : file.entries()) {
    tensors.emplace_back(e.name, file.tensor(e.name));
  }
  static const fitgrad::fuzz::TempFile copy_file("copy.safetensors");
  fitgrad::io::save_safetensors(copy_file.path(), tensors, file.metadata());
  const fitgrad::io::SafetensorsFile copy = fitgrad::io::SafetensorsFile::open(copy_file.path());
  if (copy.metadata() != file.metadata() || copy.entries().size() != file.entries().size()) {
    std::abort();
  }
  for (size_t i = 0; i < copy.entries().size(); ++i) {
    const auto &a = file.entries()[i], &b = copy.entries()[i];
    if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.begin != b.begin ||
        a.end != b.end) {
      std::abort();
    }
  }
  const size_t data = file.entries().empty() ? 0 : file.entries().back().end;
  if (std::memcmp(file.mapped_data() + file.mapped_size() - data,
                  copy.mapped_data() + copy.mapped_size() - data, data) != 0) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fitgrad::fuzz::TempFile scratch("input.safetensors");
  std::optional<fitgrad::io::SafetensorsFile> file;
  try {
    file = fitgrad::io::SafetensorsFile::open(scratch.write(data, size));
  } catch (const fitgrad::Error&) {
  }
  if (!file) return 0;
  uint8_t sum = 0;
  for (const fitgrad::io::SafetensorsEntry& e : file->entries()) {
    const fitgrad::Tensor t = file->tensor(e.name);
    if (t.numel() != fitgrad::numel(e.shape)) std::abort();
    const auto* bytes = static_cast<const uint8_t*>(t.nbytes() ? t.data_ptr() : nullptr);
    for (size_t i = 0; i < t.nbytes(); ++i) sum = uint8_t(sum + bytes[i]);
  }
  sink = sum;
  check_round_trip(*file);
  return 0;
}
