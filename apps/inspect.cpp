// `fitgrad inspect`: one table of tensors and one of metadata, for either format.
#include "apps/inspect.h"

#include <fmt/format.h>

#include <array>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "io/gguf.h"
#include "io/safetensors.h"
#include "nn/config.h"
#include "tensor/interrupt.h"
#include "tensor/memory/bytes.h"
#include "train/checkpoint_dir.h"
#include "train/model_source.h"

namespace fitgrad::apps {

using train::folder_weights;
using train::kCheckpointManifest;
using train::verify_checkpoint;

namespace {

void print_tensor(std::ostream& out, const std::string& name, const std::string& dtype,
                  const Shape& shape, uint64_t bytes) {
  out << fmt::format("  {:<48} {:<6} {:<22} {:>12}\n", name, dtype, shape_str(shape),
                     format_bytes(int64_t(bytes)));
}

void inspect_safetensors(const std::string& path, std::ostream& out) {
  const io::SafetensorsFile file = io::SafetensorsFile::open(path);
  uint64_t total = 0;
  int64_t params = 0;
  out << fmt::format("{}: safetensors, {} tensors\n", path, file.entries().size());
  for (const io::SafetensorsEntry& e : file.entries()) {
    interruption_point();  // Note [Interruption points]
    print_tensor(out, e.name, std::string(dtype_name(e.dtype)), e.shape, e.end - e.begin);
    total += e.end - e.begin;
    params += numel(e.shape);
  }
  out << fmt::format("  total: {} elements, {}\n", params, format_bytes(int64_t(total)));
  out << fmt::format("metadata ({} keys)\n", file.metadata().size());
  for (const auto& [key, value] : file.metadata()) out << fmt::format("  {} = {}\n", key, value);
}

void inspect_gguf(const std::string& path, std::ostream& out) {
  const io::GgufFile file = io::GgufFile::open(path);
  uint64_t total = 0;
  int64_t params = 0;
  out << fmt::format("{}: GGUF v{}, {} tensors\n", path, file.version(), file.tensors().size());
  for (const io::GgufTensorInfo& t : file.tensors()) {
    interruption_point();  // Note [Interruption points]
    print_tensor(out, t.name, t.type_name(), t.shape(), t.nbytes);
    total += t.nbytes;
    params += t.numel;
  }
  out << fmt::format("  total: {} elements, {}\n", params, format_bytes(int64_t(total)));
  out << fmt::format("metadata ({} keys)\n", file.metadata().size());
  for (const auto& [key, value] : file.metadata().entries())
    out << fmt::format("  {} = {}\n", key, value.str());
}

// A checkpoint directory: every file verified against the manifest (Note [Verified
// checkpoints] in train/checkpoint_dir.h), then listed.
void inspect_checkpoint(const std::string& path, std::ostream& out) {
  verify_checkpoint(path);
  out << fmt::format("{}: fitgrad checkpoint, every file matches {}\n", path, kCheckpointManifest);
  for (const auto& e : std::filesystem::directory_iterator(path))
    if (e.is_regular_file())
      out << fmt::format("  {:<32} {:>12}\n", e.path().filename().string(),
                         format_bytes(int64_t(e.file_size())));
}

// A Hugging Face model folder (Note [Sharded model folders] in model_source.cpp): its config,
// the file(s) its weights are in, and every tensor as the loader reads it (bitsandbytes 4-bit
// and int8 weights as their dequantized dtype).
void inspect_model_folder(const std::string& path, std::ostream& out) {
  const nn::ModelConfig cfg =
      nn::load_config_json((std::filesystem::path(path) / "config.json").string());
  std::string file;
  const nn::TensorSource source = folder_weights(path, &file);
  out << fmt::format(
      "{}: Hugging Face model folder, {} ({} parameters by its config), weights in {}, "
      "{} tensors\n",
      path, cfg.model_type, cfg.num_parameters(), file, source.entries.size());
  int64_t params = 0;
  for (const nn::TensorSource::Entry& e : source.entries) {
    interruption_point();  // Note [Interruption points]
    print_tensor(out, e.name, std::string(dtype_name(e.dtype)), e.shape,
                 uint64_t(numel(e.shape)) * element_size(e.dtype));
    params += numel(e.shape);
  }
  out << fmt::format("  total: {} elements\n", params);
}

}  // namespace

void inspect_file(const std::string& path, std::ostream& out) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (!std::filesystem::exists(std::filesystem::path(path) / kCheckpointManifest) &&
        std::filesystem::is_regular_file(std::filesystem::path(path) / "config.json"))
      return inspect_model_folder(path, out);
    return inspect_checkpoint(path, out);
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.good()) {
    const std::error_code why(errno, std::generic_category());
    throw Error(fmt::format("[inspect {}] cannot open the file: {}", path, why.message()));
  }
  std::array<char, 9> head{};
  in.read(head.data(), 9);
  const std::string magic(head.data(), size_t(in.gcount()));
  if (magic.starts_with("GGUF")) return inspect_gguf(path, out);
  // safetensors: an 8-byte little-endian header length, then a JSON object.
  if (magic.size() == 9 && magic[8] == '{') return inspect_safetensors(path, out);
  throw Error(
      fmt::format("[inspect {}] is neither a safetensors file (8-byte length, then '{{') nor GGUF "
                  "(magic 'GGUF')",
                  path));
}

}  // namespace fitgrad::apps
