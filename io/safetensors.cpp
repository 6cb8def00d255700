// safetensors reading (mmap + up-front validation) and writing (reference layout, atomic
// rename). The format is small enough that every rule of its specification is checked
// here in one pass over the header; see io/safetensors.h for the layout.
#include "io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>
#include <unordered_set>

#include "io/atomic_file.h"
#include "io/json_depth.h"
#include "tensor/error.h"
#include "tensor/interrupt.h"

namespace fitgrad::io {

// Note [Little-endian host]: safetensors stores the header length and all tensor data
// little-endian, and fitgrad reads and writes the bytes as they are.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes little-endian");

namespace {

using Json = nlohmann::json;

// The reference implementation refuses headers above 100 MB; so do we, before parsing.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct DTypeName {
  std::string_view name;
  DType dtype;
};
constexpr DTypeName kDTypeNames[] = {
    {"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16}, {"I32", DType::i32},
    {"I64", DType::i64}, {"U8", DType::u8},   {"I8", DType::i8}};
// Valid in the format but without a fitgrad DType: an error that says so, not "unknown".
constexpr std::string_view kUnsupportedDTypes[] = {
    "F64",     "I16",     "U16",     "U32",     "U64", "BOOL", "F8_E4M3",
    "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4",  "C64"};

std::string_view format_name(DType dtype) {
  for (const DTypeName& d : kDTypeNames) {
    if (d.dtype == dtype) return d.name;
  }
  FG_ASSERT(false, "dtype {} has no safetensors name", dtype_name(dtype));
}

}  // namespace

// ---------------------------------------------------------------------------------------
// Reading

namespace {

// A SAX pass over the header (Note [Headers parse in linear time]): refuses a key repeated
// in one object and collects the top-level keys in order.
class KeyCheck : public nlohmann::json_sax<Json> {
 public:
  KeyCheck(const std::string& where, std::vector<std::string>& top_keys)
      : where_(where), top_keys_(top_keys) {}
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override {
    open_objects_.emplace_back();
    return true;
  }
  bool end_object() override {
    open_objects_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool key(string_t& key) override {
    if (!open_objects_.back().insert(key).second) {
      FG_CHECK(open_objects_.size() != 1, "{} tensor name '{}' appears twice in the header", where_,
               key);
      throw Error(
          fmt::format("{} key \"{}\" appears twice in one object of the header", where_, key));
    }
    if (open_objects_.size() == 1) top_keys_.push_back(key);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    throw Error(fmt::format("{} header is not valid JSON: {}", where_, e.what()));
  }

 private:
  const std::string& where_;
  std::vector<std::string>& top_keys_;
  std::vector<std::unordered_set<std::string>> open_objects_;  // the keys of each open object
};

// Validates the header of one file; `where` is the "[safetensors <path>]" prefix.
class HeaderParser {
 public:
  HeaderParser(std::string where, uint64_t data_size)
      : where_(std::move(where)), data_size_(data_size) {}

  // Parses the JSON text, rejecting repeated keys (which nlohmann would silently merge),
  // and returns the top-level keys in header order along with the document.
  //
  // Note [Headers parse in linear time]
  // nlohmann's parser with a callback scans the enclosing object at the end of every nested
  // object, so a header of n tensors took O(n^2) (200,000 tensors: minutes). The keys are
  // checked by a SAX pass that builds nothing instead, and the document is then parsed
  // without a callback: two linear passes.
  Json parse(std::string_view text, std::vector<std::string>& top_keys) const {
    // The spec says the header MUST begin with '{', so leading whitespace is an error too.
    FG_CHECK(text.starts_with('{'), "{} header does not start with '{{': it must be a JSON object",
             where_);
    KeyCheck keys(where_, top_keys);
    Json doc;
    try {
      check_json_depth(text, fmt::format("{} header", where_));
      Json::sax_parse(text.begin(), text.end(), &keys);
      doc = Json::parse(text.begin(), text.end());
    } catch (const Json::exception& e) {
      throw Error(fmt::format("{} header is not valid JSON: {}", where_, e.what()));
    }
    FG_ASSERT(doc.is_object());
    return doc;
  }

  std::map<std::string, std::string> metadata(const Json& value) const {
    FG_CHECK(value.is_object(), "{} \"__metadata__\" is a JSON {}, not an object of strings",
             where_, value.type_name());
    std::map<std::string, std::string> out;
    for (const auto& [key, v] : value.items()) {
      FG_CHECK(v.is_string(), "{} \"__metadata__\" key '{}' holds a JSON {}, not a string", where_,
               key, v.type_name());
      out.emplace(key, v.get<std::string>());
    }
    return out;
  }

  SafetensorsEntry entry(const std::string& name, const Json& value) const {
    const std::string at = fmt::format("{} tensor '{}':", where_, name);
    FG_CHECK(value.is_object(), "{} the entry is a JSON {}, not an object", at, value.type_name());
    SafetensorsEntry e;
    e.name = name;
    e.dtype = dtype(at, field(at, value, "dtype"));
    e.shape = shape(at, field(at, value, "shape"));
    const Json& offsets = field(at, value, "data_offsets");
    FG_CHECK(offsets.is_array() && offsets.size() == 2 && offsets[0].is_number_unsigned() &&
                 offsets[1].is_number_unsigned(),
             "{} \"data_offsets\" is {}, not an array of two non-negative integers", at,
             offsets.dump());
    e.begin = offsets[0].get<uint64_t>();
    e.end = offsets[1].get<uint64_t>();
    FG_CHECK(e.begin <= e.end, "{} data_offsets [{}, {}] end before they begin", at, e.begin,
             e.end);
    FG_CHECK(e.end <= data_size_,
             "{} data_offsets [{}, {}] reach past the data section of {} bytes", at, e.begin, e.end,
             data_size_);
    // numel fits in int64 (checked by shape()), and element sizes are at most 8.
    uint64_t bytes = 0;
    FG_CHECK(
        !__builtin_mul_overflow(uint64_t(fitgrad::numel(e.shape)), element_size(e.dtype), &bytes),
        "{} shape {} of {} needs more bytes than fit in 64 bits", at, shape_str(e.shape),
        format_name(e.dtype));
    FG_CHECK(e.end - e.begin == bytes,
             "{} data_offsets [{}, {}] hold {} bytes, but shape {} of {} needs {}", at, e.begin,
             e.end, e.end - e.begin, shape_str(e.shape), format_name(e.dtype), bytes);
    return e;
  }

  // The spec requires the tensors to cover the data section exactly: no overlaps, no gaps.
  // Sorts `entries` into data order (stable, so equal offsets keep the header order).
  void check_coverage(std::vector<SafetensorsEntry>& entries) const {
    std::stable_sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) {
      return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
    });
    uint64_t covered = 0;  // the data section is covered up to here
    const SafetensorsEntry* previous = nullptr;
    for (const SafetensorsEntry& e : entries) {
      FG_CHECK(e.begin >= covered,
               "{} tensor '{}' (data_offsets [{}, {}]) overlaps tensor '{}' (data_offsets "
               "[{}, {}])",
               where_, e.name, e.begin, e.end, previous->name, previous->begin, previous->end);
      FG_CHECK(e.begin == covered,
               "{} bytes [{}, {}) of the data section belong to no tensor ({} tensor '{}')", where_,
               covered, e.begin,
               previous ? "between tensor '" + previous->name + "' and" : std::string("before"),
               e.name);
      covered = e.end;
      previous = &e;
    }
    FG_CHECK(
        covered == data_size_, "{} bytes [{}, {}) of the data section belong to no tensor ({})",
        where_, covered, data_size_,
        previous ? "after tensor '" + previous->name + "'" : std::string("the header has none"));
  }

 private:
  static const Json& field(const std::string& at, const Json& entry, const char* key) {
    const auto it = entry.find(key);
    FG_CHECK(it != entry.end(), "{} the entry has no \"{}\"", at, key);
    return *it;
  }

  static DType dtype(const std::string& at, const Json& value) {
    FG_CHECK(value.is_string(), "{} \"dtype\" is a JSON {}, not a string", at, value.type_name());
    const std::string& name = value.get_ref<const std::string&>();
    for (const DTypeName& d : kDTypeNames) {
      if (d.name == name) return d.dtype;
    }
    const bool known = std::find(std::begin(kUnsupportedDTypes), std::end(kUnsupportedDTypes),
                                 name) != std::end(kUnsupportedDTypes);
    FG_CHECK(!known,
             "{} dtype {} is not supported (fitgrad reads F32, F16, BF16, I32, I64, U8, I8)", at,
             name);
    throw Error(fmt::format("{} unknown dtype \"{}\"", at, name));
  }

  static Shape shape(const std::string& at, const Json& value) {
    FG_CHECK(value.is_array(), "{} \"shape\" is a JSON {}, not an array", at, value.type_name());
    Shape shape;
    int64_t n = 1;
    for (const Json& d : value) {
      FG_CHECK(d.is_number_integer(), "{} \"shape\" {} holds {}, not an integer", at, value.dump(),
               d.dump());
      FG_CHECK(d.is_number_unsigned(), "{} \"shape\" {} has a negative size {}", at, value.dump(),
               d.dump());
      const uint64_t size = d.get<uint64_t>();
      FG_CHECK(size <= uint64_t(std::numeric_limits<int64_t>::max()) &&
                   !__builtin_mul_overflow(n, int64_t(size), &n),
               "{} \"shape\" {} has more elements than fit in 64 bits", at, value.dump());
      shape.push_back(int64_t(size));
    }
    return shape;
  }

  std::string where_;
  uint64_t data_size_;
};

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  const std::string where = fmt::format("[safetensors {}]", path);
  // Note [Zero-copy tensors over the mapping]: the file is mapped copy-on-write (Note
  // [Copy-on-write mapping] in io/mapped_file.h), so a tensor over it may be written in
  // place like any other while the file never changes. Each tensor gets its own wrapped
  // Storage whose release holds the mapping, so the mapping lives exactly as long as the
  // file object or any tensor from it. A tensor whose bytes are not aligned to its element
  // size (the format does not promise it) is copied instead, since the kernels assume
  // aligned elements.
  SafetensorsFile file;
  file.path_ = path;
  file.file_ = MappedFile::open(path, where, MapMode::copy_on_write);
  const uint64_t file_size = file.file_.size();
  FG_CHECK(file_size >= 8, "{} the file is {} bytes, shorter than the 8-byte header length", where,
           file_size);
  const char* base = file.file_.data();

  uint64_t header_size = 0;
  std::memcpy(&header_size, base, 8);  // little-endian, Note [Little-endian host]
  FG_CHECK(header_size <= kMaxHeaderBytes, "{} header length {} exceeds the limit of {} bytes",
           where, header_size, kMaxHeaderBytes);
  FG_CHECK(header_size <= file_size - 8,
           "{} header length {} reaches past the end of the file ({} bytes)", where, header_size,
           file_size);
  file.data_start_ = 8 + header_size;

  const HeaderParser parser(where, file_size - file.data_start_);
  std::vector<std::string> names;
  const Json header = parser.parse(std::string_view(base + 8, header_size), names);
  for (const std::string& name : names) {
    interruption_point();  // Note [Interruption points]
    if (name == "__metadata__") {
      file.metadata_ = parser.metadata(header.at(name));
    } else {
      file.entries_.push_back(parser.entry(name, header.at(name)));
    }
  }
  parser.check_coverage(file.entries_);
  for (size_t i = 0; i < file.entries_.size(); ++i) file.index_.emplace(file.entries_[i].name, i);
  return file;
}

void SafetensorsFile::drop_pages(const std::string& name) const {
  const auto it = index_.find(name);
  FG_CHECK(it != index_.end(), "[safetensors {}] no tensor named '{}'", path_, name);
  const SafetensorsEntry& e = entries_[it->second];
  file_.drop_pages(data_start_ + e.begin, e.end - e.begin);
}

Tensor SafetensorsFile::tensor(const std::string& name) const {
  interruption_point();  // Note [Interruption points]: each tensor loaded
  const auto it = index_.find(name);
  FG_CHECK(it != index_.end(), "[safetensors {}] no tensor named '{}'", path_, name);
  const SafetensorsEntry& e = entries_[it->second];
  std::byte* bytes = reinterpret_cast<std::byte*>(file_.writable_data()) + data_start_ + e.begin;
  const size_t nbytes = e.end - e.begin;
  if (reinterpret_cast<uintptr_t>(bytes) % element_size(e.dtype) != 0) {
    // Note [Zero-copy tensors over the mapping]: misaligned bytes are copied.
    Tensor copy = Tensor::empty(e.shape, e.dtype);
    if (nbytes > 0) std::memcpy(copy.data_ptr(), bytes, nbytes);
    return copy;
  }
  return Tensor::from_storage(
      Storage::wrap(bytes, nbytes, [keep = file_]() mutable { keep = MappedFile(); }), e.shape,
      e.dtype);
}

std::map<std::string, Tensor> SafetensorsFile::tensors() const {
  std::map<std::string, Tensor> out;
  for (const SafetensorsEntry& e : entries_) out.emplace(e.name, tensor(e.name));
  return out;
}

const std::byte* SafetensorsFile::mapped_data() const {
  return reinterpret_cast<const std::byte*>(file_.data());
}
size_t SafetensorsFile::mapped_size() const { return file_.size(); }

// ---------------------------------------------------------------------------------------
// Writing

namespace {

// A JSON string literal; names must be valid UTF-8, as JSON requires.
std::string json_string(const std::string& where, const std::string& s) {
  try {
    return Json(s).dump();
  } catch (const Json::exception& e) {
    throw Error(fmt::format("{} '{}' is not valid UTF-8: {}", where, s, e.what()));
  }
}

}  // namespace

// Note [Header layout]: the header is compact JSON with "__metadata__" first (when
// present), then the tensors in the caller's order, each as {"dtype", "shape",
// "data_offsets"} in that key order, with data laid out in the same order. Spaces pad it
// to a multiple of 8 bytes so the data section starts 8-aligned. This is what the
// reference implementation writes, so the files compare byte for byte.
void write_safetensors(AtomicFile& out, const std::string& where,
                       const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto& [key, value] : metadata) {
      if (header.back() != '{') header += ',';
      header += json_string(where, key) + ':' + json_string(where, value);
    }
    header += '}';
  }
  std::set<std::string_view> names;
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    FG_CHECK(name != "__metadata__", "{} '__metadata__' is reserved, not a tensor name", where);
    FG_CHECK(names.insert(name).second, "{} tensor name '{}' is given twice", where, name);
    FG_CHECK(t.defined(), "{} tensor '{}' is undefined", where, name);
    FG_CHECK(t.device().has_bytes(), "{} tensor '{}' is on {}, which has no bytes to write", where,
             name, t.device().str());
    if (header.back() != '{') header += ',';
    header += fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          json_string(where, name), format_name(t.dtype()),
                          fmt::join(t.shape(), ","), offset, offset + t.nbytes());
    offset += t.nbytes();
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');

  const uint64_t header_size = header.size();  // little-endian, Note [Little-endian host]
  out.write(&header_size, 8);
  out.write(header.data(), header.size());
  // Note [Interruption points]: a file of gigabytes stops within a second of a signal, in
  // pieces of 64 MiB; the caller's AtomicFile is then never committed.
  constexpr size_t kPiece = size_t(64) << 20;
  for (const auto& [name, t] : tensors) {
    const Tensor host = t.to(Device::cpu()).contiguous();
    const auto* bytes = static_cast<const char*>(host.data_ptr());
    for (size_t at = 0; at < host.nbytes(); at += kPiece) {
      interruption_point();
      out.write(bytes + at, std::min(kPiece, host.nbytes() - at));
    }
  }
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  const std::string where = fmt::format("[safetensors {}]", path);
  AtomicFile out(path, where);
  write_safetensors(out, where, tensors, metadata);
  out.commit();
}

}  // namespace fitgrad::io
