// GoldenFile: reads and validates the .gtb format described in golden_file.h.
#include "tests/golden/golden_file.h"

#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>

#include "tensor/error.h"

namespace fitgrad::testing {
namespace {

static_assert(std::endian::native == std::endian::little,
              "golden files are little-endian; add byte swapping for this host");

constexpr uint64_t kMaxHeader = uint64_t(1) << 24;  // 16 MiB: far above any real header

DType parse_dtype(const std::string& path, const std::string& name, const std::string& s) {
  if (s == "f32") return DType::f32;
  if (s == "i64") return DType::i64;
  throw Error(fmt::format("[golden {}] tensor '{}' has unknown dtype '{}'", path, name, s));
}

}  // namespace

GoldenFile::GoldenFile(std::string path) : path_(std::move(path)) {
  std::ifstream in(path_, std::ios::binary);
  FG_CHECK(in, "[golden {}] cannot open the file", path_);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  FG_CHECK(bytes.size() >= 8, "[golden {}] {} bytes: too short for the 8-byte header length", path_,
           bytes.size());
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  FG_CHECK(header_len <= kMaxHeader && header_len <= bytes.size() - 8,
           "[golden {}] header length {} runs past the end of the {}-byte file", path_, header_len,
           bytes.size());

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + int64_t(header_len));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("[golden {}] header is not valid JSON: {}", path_, e.what()));
  }
  FG_CHECK(header.is_object() && header.value("format", "") == "fitgrad-golden",
           "[golden {}] not a fitgrad golden file (format field missing or wrong)", path_);
  FG_CHECK(header.value("version", 0) == 1, "[golden {}] unsupported version {}", path_,
           header.value("version", 0));
  FG_CHECK(header.contains("tensors") && header["tensors"].is_object(),
           "[golden {}] header has no \"tensors\" object", path_);
  tensors_ = header["tensors"];
  meta_ = header.contains("meta") ? header["meta"] : nlohmann::json::object();
  data_.assign(bytes.begin() + 8 + int64_t(header_len), bytes.end());

  // Validate every entry now, so a malformed file fails on load, naming the tensor.
  for (const auto& [name, e] : tensors_.items()) {
    try {
      const DType dtype = parse_dtype(path_, name, e.at("dtype").get<std::string>());
      Shape shape = e.at("shape").get<Shape>();
      for (int64_t d : shape)
        FG_CHECK(d >= 0, "[golden {}] tensor '{}' has a negative size", path_, name);
      const int64_t offset = e.at("offset").get<int64_t>();
      const int64_t nbytes = e.at("nbytes").get<int64_t>();
      const int64_t want = fitgrad::numel(shape) * int64_t(element_size(dtype));
      FG_CHECK(nbytes == want, "[golden {}] tensor '{}' has nbytes {} but shape {} needs {}", path_,
               name, nbytes, shape_str(shape), want);
      FG_CHECK(offset >= 0 && offset <= int64_t(data_.size()) &&
                   nbytes <= int64_t(data_.size()) - offset,
               "[golden {}] tensor '{}' (offset {}, {} bytes) runs past the {}-byte data section",
               path_, name, offset, nbytes, data_.size());
    } catch (const nlohmann::json::exception& ex) {
      throw Error(
          fmt::format("[golden {}] tensor '{}' has a malformed entry: {}", path_, name, ex.what()));
    }
  }
}

std::vector<std::string> GoldenFile::names() const {
  std::vector<std::string> out;
  for (const auto& [name, e] : tensors_.items()) out.push_back(name);
  return out;  // nlohmann::json objects iterate in sorted key order
}

bool GoldenFile::has(const std::string& name) const { return tensors_.contains(name); }

Tensor GoldenFile::tensor(const std::string& name) const {
  FG_CHECK(has(name), "[golden {}] no tensor named '{}'", path_, name);
  const auto& e = tensors_.at(name);
  const DType dtype = parse_dtype(path_, name, e.at("dtype").get<std::string>());
  Tensor t = Tensor::empty(e.at("shape").get<Shape>(), dtype);
  const auto nbytes = size_t(e.at("nbytes").get<int64_t>());
  if (nbytes > 0) std::memcpy(t.data_ptr(), data_.data() + e.at("offset").get<int64_t>(), nbytes);
  return t;
}

std::string golden_path(const std::string& file) {
  return std::string(FITGRAD_GOLDEN_DIR) + "/" + file;
}

}  // namespace fitgrad::testing
