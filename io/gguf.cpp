// The GGUF reader of gguf.h: a bounds-checked cursor over the memory-mapped file parses
// the header, the metadata and the tensor infos, and every fault becomes a fitgrad::Error
// "[gguf <path>] ..." that names what was being read and where.
#include "io/gguf.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <limits>
#include <type_traits>

#include "tensor/error.h"
#include "tensor/half.h"
#include "tensor/interrupt.h"

namespace fitgrad::io {

namespace {

constexpr uint64_t kMaxElements = uint64_t(1) << 40;
constexpr int kMaxDims = 4;
constexpr int kMaxArrayDepth = 16;  // arrays of arrays of ...; a bound on the recursion
constexpr uint64_t kMaxAlignment = uint64_t(1) << 30;

// Smallest encoding of each value type, used to refuse counts that cannot fit the bytes
// left before anything is allocated for them.
uint64_t min_encoded_size(uint32_t type) {
  switch (GgufType(type)) {
    case GgufType::u8:
    case GgufType::i8:
    case GgufType::boolean: return 1;
    case GgufType::u16:
    case GgufType::i16: return 2;
    case GgufType::u32:
    case GgufType::i32:
    case GgufType::f32: return 4;
    case GgufType::u64:
    case GgufType::i64:
    case GgufType::f64:
    case GgufType::string: return 8;  // the length
    case GgufType::array: return 12;  // element type + count
  }
  return 0;  // unknown
}

// A bounds-checked little-endian cursor over the file's bytes. `what` names the item
// being read for the error message.
class Reader {
 public:
  Reader(const std::string& path, const uint8_t* data, uint64_t size)
      : path_(path), data_(data), size_(size) {}

  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& message) const {
    throw Error(fmt::format("[gguf {}] {}", path_, message));
  }

  void need(uint64_t n, const std::string& what) const {
    if (n > left())
      fail(fmt::format("truncated: {} at offset {} needs {} bytes, only {} left", what, pos_, n,
                       left()));
  }

  template <class T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));  // the host is little-endian, like the file
    pos_ += sizeof(T);
    return v;
  }

  std::string read_string(const std::string& what) {
    const uint64_t at = pos_;
    const uint64_t n = read<uint64_t>(what + " (its length)");
    if (n > left())
      fail(
          fmt::format("string length {} of {} at offset {} runs past the end of the file "
                      "({} bytes left)",
                      n, what, at, left()));
    std::string s(reinterpret_cast<const char*>(data_ + pos_), size_t(n));
    pos_ += n;
    return s;
  }

 private:
  const std::string& path_;
  const uint8_t* data_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

GgufValue read_value(Reader& r, uint32_t type, const std::string& what, int depth);

// n elements of `type`; the caller has checked that n * min size fits the bytes left.
GgufValue read_array_body(Reader& r, uint32_t type, uint64_t n, const std::string& what,
                          int depth) {
  const auto et = GgufType(type);
  auto array = [&](GgufValue::Data d) { return GgufValue(GgufType::array, std::move(d), et); };
  switch (et) {
    case GgufType::u8:
    case GgufType::u16:
    case GgufType::u32:
    case GgufType::u64: {
      std::vector<uint64_t> v(n);
      for (auto& x : v) {
        if (et == GgufType::u8)
          x = r.read<uint8_t>(what);
        else if (et == GgufType::u16)
          x = r.read<uint16_t>(what);
        else if (et == GgufType::u32)
          x = r.read<uint32_t>(what);
        else
          x = r.read<uint64_t>(what);
      }
      return array(std::move(v));
    }
    case GgufType::i8:
    case GgufType::i16:
    case GgufType::i32:
    case GgufType::i64: {
      std::vector<int64_t> v(n);
      for (auto& x : v) {
        if (et == GgufType::i8)
          x = r.read<int8_t>(what);
        else if (et == GgufType::i16)
          x = r.read<int16_t>(what);
        else if (et == GgufType::i32)
          x = r.read<int32_t>(what);
        else
          x = r.read<int64_t>(what);
      }
      return array(std::move(v));
    }
    case GgufType::f32:
    case GgufType::f64: {
      std::vector<double> v(n);
      for (auto& x : v) x = et == GgufType::f32 ? r.read<float>(what) : r.read<double>(what);
      return array(std::move(v));
    }
    case GgufType::boolean: {
      std::vector<bool> v(n);
      for (uint64_t i = 0; i < n; ++i) v[i] = r.read<uint8_t>(what) != 0;
      return array(std::move(v));
    }
    case GgufType::string: {
      std::vector<std::string> v;
      v.reserve(n);
      for (uint64_t i = 0; i < n; ++i) v.push_back(r.read_string(what));
      return array(std::move(v));
    }
    case GgufType::array: {
      GgufValue::Array v;
      v.reserve(n);
      for (uint64_t i = 0; i < n; ++i) v.push_back(read_value(r, type, what, depth + 1));
      return array(std::move(v));
    }
  }
  r.fail(fmt::format("{} is an array of unknown value type {}", what, type));
}

GgufValue read_value(Reader& r, uint32_t type, const std::string& what, int depth) {
  switch (GgufType(type)) {
    case GgufType::u8: return {GgufType::u8, uint64_t(r.read<uint8_t>(what))};
    case GgufType::i8: return {GgufType::i8, int64_t(r.read<int8_t>(what))};
    case GgufType::u16: return {GgufType::u16, uint64_t(r.read<uint16_t>(what))};
    case GgufType::i16: return {GgufType::i16, int64_t(r.read<int16_t>(what))};
    case GgufType::u32: return {GgufType::u32, uint64_t(r.read<uint32_t>(what))};
    case GgufType::i32: return {GgufType::i32, int64_t(r.read<int32_t>(what))};
    case GgufType::u64: return {GgufType::u64, r.read<uint64_t>(what)};
    case GgufType::i64: return {GgufType::i64, r.read<int64_t>(what)};
    case GgufType::f32: return {GgufType::f32, double(r.read<float>(what))};
    case GgufType::f64: return {GgufType::f64, r.read<double>(what)};
    case GgufType::boolean: return {GgufType::boolean, r.read<uint8_t>(what) != 0};
    case GgufType::string: return {GgufType::string, r.read_string(what)};
    case GgufType::array: {
      if (depth >= kMaxArrayDepth)
        r.fail(fmt::format("{} nests arrays deeper than {} levels", what, kMaxArrayDepth));
      const uint64_t at = r.pos();
      const uint32_t et = r.read<uint32_t>(what + " (array element type)");
      const uint64_t min = min_encoded_size(et);
      if (min == 0) r.fail(fmt::format("{} is an array of unknown value type {}", what, et));
      const uint64_t n = r.read<uint64_t>(what + " (array length)");
      if (n > r.left() / min)
        r.fail(
            fmt::format("array of {} {} in {} at offset {} runs past the end of the file "
                        "({} bytes left)",
                        n, gguf_type_name(GgufType(et)), what, at, r.left()));
      return read_array_body(r, et, n, what, depth);
    }
  }
  r.fail(fmt::format("{} has unknown value type {}", what, type));
}

[[noreturn]] void value_error(const GgufValue& v, const char* wanted) {
  throw Error(fmt::format("[gguf] value of type {} is not {}", gguf_type_name(v.type()), wanted));
}

std::string quoted(const std::string& s, size_t max_chars) {
  std::string out = "\"";
  size_t n = 0;
  for (char c : s) {
    if (n++ == max_chars) {
      out += "...";
      break;
    }
    if (c == '\n')
      out += "\\n";
    else if (c == '"')
      out += "\\\"";
    else
      out += c;
  }
  return out + "\"";
}

}  // namespace

std::string_view gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::u8: return "u8";
    case GgufType::i8: return "i8";
    case GgufType::u16: return "u16";
    case GgufType::i16: return "i16";
    case GgufType::u32: return "u32";
    case GgufType::i32: return "i32";
    case GgufType::f32: return "f32";
    case GgufType::boolean: return "bool";
    case GgufType::string: return "string";
    case GgufType::array: return "array";
    case GgufType::u64: return "u64";
    case GgufType::i64: return "i64";
    case GgufType::f64: return "f64";
  }
  return "unknown";
}

// ---- GgufValue ----

size_t GgufValue::size() const {
  if (!is_array()) return 0;
  return std::visit(
      [](const auto& v) -> size_t {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, uint64_t> || std::is_same_v<V, int64_t> ||
                      std::is_same_v<V, double> || std::is_same_v<V, bool> ||
                      std::is_same_v<V, std::string>)
          return 0;
        else
          return v.size();
      },
      data_);
}

uint64_t GgufValue::as_u64() const {
  if (auto* u = std::get_if<uint64_t>(&data_)) return *u;
  if (auto* i = std::get_if<int64_t>(&data_)) {
    if (*i < 0)
      throw Error(fmt::format("[gguf] value {} is negative, not an unsigned integer", *i));
    return uint64_t(*i);
  }
  value_error(*this, "an integer");
}

int64_t GgufValue::as_i64() const {
  if (auto* i = std::get_if<int64_t>(&data_)) return *i;
  if (auto* u = std::get_if<uint64_t>(&data_)) {
    if (*u > uint64_t(std::numeric_limits<int64_t>::max()))
      throw Error(fmt::format("[gguf] value {} does not fit i64", *u));
    return int64_t(*u);
  }
  value_error(*this, "an integer");
}

uint32_t GgufValue::as_u32() const {
  const uint64_t v = as_u64();
  if (v > std::numeric_limits<uint32_t>::max())
    throw Error(fmt::format("[gguf] value {} does not fit u32", v));
  return uint32_t(v);
}

int32_t GgufValue::as_i32() const {
  const int64_t v = as_i64();
  if (v < std::numeric_limits<int32_t>::min() || v > std::numeric_limits<int32_t>::max())
    throw Error(fmt::format("[gguf] value {} does not fit i32", v));
  return int32_t(v);
}

double GgufValue::as_f64() const {
  if (auto* d = std::get_if<double>(&data_)) return *d;
  if (auto* u = std::get_if<uint64_t>(&data_)) return double(*u);
  if (auto* i = std::get_if<int64_t>(&data_)) return double(*i);
  value_error(*this, "a number");
}

bool GgufValue::as_bool() const {
  if (auto* b = std::get_if<bool>(&data_)) return *b;
  value_error(*this, "a bool");
}

const std::string& GgufValue::as_string() const {
  if (auto* s = std::get_if<std::string>(&data_)) return *s;
  value_error(*this, "a string");
}

const std::vector<std::string>& GgufValue::as_string_array() const {
  if (auto* s = std::get_if<std::vector<std::string>>(&data_)) return *s;
  value_error(*this, "an array of strings");
}

std::vector<int64_t> GgufValue::as_i64_array() const {
  if (auto* i = std::get_if<std::vector<int64_t>>(&data_)) return *i;
  if (auto* u = std::get_if<std::vector<uint64_t>>(&data_)) {
    std::vector<int64_t> out;
    out.reserve(u->size());
    for (uint64_t x : *u) {
      if (x > uint64_t(std::numeric_limits<int64_t>::max()))
        throw Error(fmt::format("[gguf] array element {} does not fit i64", x));
      out.push_back(int64_t(x));
    }
    return out;
  }
  value_error(*this, "an array of integers");
}

std::vector<int32_t> GgufValue::as_i32_array() const {
  std::vector<int32_t> out;
  for (int64_t x : as_i64_array()) {
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max())
      throw Error(fmt::format("[gguf] array element {} does not fit i32", x));
    out.push_back(int32_t(x));
  }
  return out;
}

std::vector<float> GgufValue::as_f32_array() const {
  if (auto* d = std::get_if<std::vector<double>>(&data_))
    return std::vector<float>(d->begin(), d->end());
  if (std::holds_alternative<std::vector<int64_t>>(data_) ||
      std::holds_alternative<std::vector<uint64_t>>(data_)) {
    std::vector<float> out;
    for (int64_t x : as_i64_array()) out.push_back(float(x));
    return out;
  }
  value_error(*this, "an array of numbers");
}

std::string GgufValue::str(size_t max_chars) const {
  if (!is_array()) {
    return std::visit(
        [&](const auto& v) -> std::string {
          using V = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<V, std::string>)
            return quoted(v, max_chars);
          else if constexpr (std::is_same_v<V, bool>)
            return v ? "true" : "false";
          else if constexpr (std::is_same_v<V, uint64_t> || std::is_same_v<V, int64_t> ||
                             std::is_same_v<V, double>)
            return fmt::format("{}", v);
          else
            return "?";
        },
        data_);
  }
  std::string out = fmt::format("[{} x {}] [", gguf_type_name(element_type_), size());
  const size_t shown = std::min<size_t>(size(), 3);
  std::visit(
      [&](const auto& v) {
        using V = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<V, std::vector<std::string>>) {
          for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + quoted(v[i], 20);
        } else if constexpr (std::is_same_v<V, GgufValue::Array>) {
          for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + v[i].str(20);
        } else if constexpr (std::is_same_v<V, std::vector<bool>>) {
          for (size_t i = 0; i < shown; ++i)
            out += (i ? ", " : "") + std::string(v[i] ? "true" : "false");
        } else if constexpr (!std::is_same_v<V, uint64_t> && !std::is_same_v<V, int64_t> &&
                             !std::is_same_v<V, double> && !std::is_same_v<V, bool> &&
                             !std::is_same_v<V, std::string>) {
          for (size_t i = 0; i < shown; ++i) out += fmt::format("{}{}", i ? ", " : "", v[i]);
        }
      },
      data_);
  if (size() > shown) out += ", ...";
  return out + "]";
}

// ---- GgufMetadata ----

bool GgufMetadata::insert(std::string key, GgufValue value) {
  if (index_.count(key)) return false;
  index_.emplace(key, entries_.size());
  entries_.emplace_back(std::move(key), std::move(value));
  return true;
}

const GgufValue& GgufMetadata::get(const std::string& key) const {
  auto it = index_.find(key);
  if (it == index_.end())
    throw Error(fmt::format("[gguf {}] metadata key '{}' is missing", path_, key));
  return entries_[it->second].second;
}

// Runs fn(value) and restates a failed conversion with the file and the key.
template <class Fn>
decltype(auto) GgufMetadata::typed(const std::string& key, const char* what, Fn&& fn) const {
  const GgufValue& v = get(key);
  try {
    return fn(v);
  } catch (const Error& e) {
    std::string detail = e.what();
    if (detail.rfind("[gguf] ", 0) == 0) detail = detail.substr(7);
    throw Error(fmt::format(
        "[gguf {}] metadata key '{}' ({}{}) is not {}: {}", path_, key, gguf_type_name(v.type()),
        v.is_array() ? fmt::format(" of {}", gguf_type_name(v.element_type())) : std::string(),
        what, detail));
  }
}

const std::string& GgufMetadata::get_string(const std::string& key) const {
  return typed(key, "a string",
               [](const GgufValue& v) -> const std::string& { return v.as_string(); });
}
uint32_t GgufMetadata::get_u32(const std::string& key) const {
  return typed(key, "a u32", [](const GgufValue& v) { return v.as_u32(); });
}
uint64_t GgufMetadata::get_u64(const std::string& key) const {
  return typed(key, "a u64", [](const GgufValue& v) { return v.as_u64(); });
}
int64_t GgufMetadata::get_i64(const std::string& key) const {
  return typed(key, "an i64", [](const GgufValue& v) { return v.as_i64(); });
}
float GgufMetadata::get_f32(const std::string& key) const {
  return typed(key, "a number", [](const GgufValue& v) { return v.as_f32(); });
}
bool GgufMetadata::get_bool(const std::string& key) const {
  return typed(key, "a bool", [](const GgufValue& v) { return v.as_bool(); });
}
const std::vector<std::string>& GgufMetadata::get_string_array(const std::string& key) const {
  return typed(
      key, "an array of strings",
      [](const GgufValue& v) -> const std::vector<std::string>& { return v.as_string_array(); });
}
std::vector<int32_t> GgufMetadata::get_i32_array(const std::string& key) const {
  return typed(key, "an array of i32", [](const GgufValue& v) { return v.as_i32_array(); });
}
std::vector<float> GgufMetadata::get_f32_array(const std::string& key) const {
  return typed(key, "an array of numbers", [](const GgufValue& v) { return v.as_f32_array(); });
}

// ---- GgufFile ----

uint64_t GgufFile::file_size() const { return file_.size(); }

GgufFile GgufFile::open(const std::string& path) {
  auto fail = [&](const std::string& message) -> void {
    throw Error(fmt::format("[gguf {}] {}", path, message));
  };

  // ---- map ----  (copy-on-write: Note [Copy-on-write mapping] in io/mapped_file.h)
  const MappedFile file =
      MappedFile::open(path, fmt::format("[gguf {}]", path), MapMode::copy_on_write);
  if (file.size() < 24)
    fail(fmt::format("truncated: the header needs 24 bytes, the file has {}", file.size()));
  const auto* bytes = reinterpret_cast<const uint8_t*>(file.data());

  GgufFile f;
  f.path_ = path;
  f.file_ = file;
  f.metadata_ = GgufMetadata(path);
  Reader r(f.path_, bytes, file.size());

  // ---- header ----
  const uint8_t* b = bytes;
  if (std::memcmp(b, "GGUF", 4) != 0) {
    std::string shown;
    for (int i = 0; i < 4; ++i)
      shown += (b[i] >= 0x20 && b[i] < 0x7F) ? std::string(1, char(b[i]))
                                             : fmt::format("\\x{:02x}", b[i]);
    fail(fmt::format("bad magic '{}' (expected 'GGUF'): not a GGUF file", shown));
  }
  r.read<uint32_t>("magic");
  f.version_ = r.read<uint32_t>("version");
  if (f.version_ != 2 && f.version_ != 3) {
    const bool swapped = f.version_ == 0x02000000u || f.version_ == 0x03000000u;
    fail(fmt::format("unsupported version {}{} (this reader handles versions 2 and 3)", f.version_,
                     swapped ? ", a big-endian file" : ""));
  }
  const uint64_t n_tensors = r.read<uint64_t>("tensor count");
  const uint64_t n_kv = r.read<uint64_t>("metadata count");
  // A metadata entry takes at least 13 bytes (key length, type, a u8) and a tensor info
  // 32 (name length, n_dims, one dim, type, offset).
  if (n_kv > r.left() / 13)
    fail(fmt::format("metadata count {} is impossible: the file has {} bytes after the header",
                     n_kv, r.left()));
  if (n_tensors > (r.left() - n_kv * 13) / 32)
    fail(fmt::format("tensor count {} is impossible: the file has {} bytes after the header",
                     n_tensors, r.left()));

  // ---- metadata ----
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key = r.read_string(fmt::format("the key of metadata entry #{}", i));
    const std::string what = fmt::format("metadata key '{}'", key);
    const uint32_t type = r.read<uint32_t>(what + " (value type)");
    if (min_encoded_size(type) == 0) fail(fmt::format("{} has unknown value type {}", what, type));
    GgufValue value = read_value(r, type, what, 0);
    if (!f.metadata_.insert(key, std::move(value)))
      fail(fmt::format("duplicate metadata key '{}'", key));
  }
  if (f.metadata_.has("general.alignment")) {
    const GgufValue& a = f.metadata_.get("general.alignment");
    uint64_t align = 0;
    if (auto* u = std::get_if<uint64_t>(&a.data()))
      align = *u;
    else if (auto* i = std::get_if<int64_t>(&a.data()))
      align = *i > 0 ? uint64_t(*i) : 0;
    else
      fail(fmt::format("general.alignment is a {}, not an integer", gguf_type_name(a.type())));
    if (align == 0 || (align & (align - 1)) != 0 || align > kMaxAlignment)
      fail(fmt::format("general.alignment {} is not a power of two up to 2^30", a.str()));
    f.alignment_ = align;
  }

  // ---- tensor infos ----
  f.tensors_.reserve(n_tensors);
  for (uint64_t i = 0; i < n_tensors; ++i) {
    interruption_point();  // Note [Interruption points]
    GgufTensorInfo t;
    t.name = r.read_string(fmt::format("the name of tensor #{}", i));
    const std::string what = fmt::format("tensor '{}'", t.name);
    const uint32_t n_dims = r.read<uint32_t>(what + " (n_dims)");
    if (n_dims < 1 || n_dims > uint32_t(kMaxDims))
      fail(fmt::format("{} has n_dims {} (must be 1..{})", what, n_dims, kMaxDims));
    std::vector<uint64_t> dims(n_dims);
    for (auto& d : dims) d = r.read<uint64_t>(what + " (dims)");
    t.type = r.read<uint32_t>(what + " (ggml type)");
    t.offset = r.read<uint64_t>(what + " (offset)");

    const std::string dims_str = fmt::format("[{}]", fmt::join(dims, ", "));
    uint64_t n = 1;
    for (uint64_t d : dims) {
      if (d > kMaxElements || (d != 0 && n > kMaxElements / d))
        fail(fmt::format("{} has dims {} (ne, fastest first): more than 2^40 elements", what,
                         dims_str));
      n *= d;
    }
    const auto type_info = ggml_type_info(t.type);
    if (!type_info) fail(fmt::format("{} has unknown ggml type {}", what, t.type));
    if (dims[0] % uint64_t(type_info->block_size) != 0)
      fail(fmt::format("{} ({}) has ne[0] = {}, not a multiple of its block size {}", what,
                       type_info->name, dims[0], type_info->block_size));
    t.ne.assign(dims.begin(), dims.end());
    t.numel = int64_t(n);
    t.nbytes = n / uint64_t(type_info->block_size) * uint64_t(type_info->type_size);
    if (t.offset % f.alignment_ != 0)
      fail(fmt::format("{} has offset {}, not a multiple of the alignment {}", what, t.offset,
                       f.alignment_));
    if (f.index_.count(t.name)) fail(fmt::format("duplicate tensor name '{}'", t.name));
    f.index_.emplace(t.name, f.tensors_.size());
    f.tensors_.push_back(std::move(t));
  }

  // ---- data section ----
  const uint64_t end_of_infos = r.pos();
  f.data_start_ = (end_of_infos + f.alignment_ - 1) / f.alignment_ * f.alignment_;
  const uint64_t data_size =
      f.data_start_ <= file.size() ? file.size() - f.data_start_ : uint64_t(0);
  for (const auto& t : f.tensors_) {
    if (t.offset > data_size || t.nbytes > data_size - t.offset)
      fail(
          fmt::format("tensor '{}' ({} bytes at offset {} of the data section) lies outside "
                      "the file: the data section at byte {} holds {} bytes",
                      t.name, t.nbytes, t.offset, f.data_start_, data_size));
  }
  return f;
}

const GgufTensorInfo& GgufFile::info(const std::string& name) const {
  auto it = index_.find(name);
  if (it == index_.end()) throw Error(fmt::format("[gguf {}] no tensor named '{}'", path_, name));
  return tensors_[it->second];
}

const uint8_t* GgufFile::tensor_data(const std::string& name) const {
  return reinterpret_cast<const uint8_t*>(file_.data()) + data_start_ + info(name).offset;
}

Tensor GgufFile::tensor(const std::string& name, DType out) const {
  const GgufTensorInfo& t = info(name);
  if (out != DType::f32 && out != DType::f16 && out != DType::bf16)
    throw Error(fmt::format("[gguf {}] tensor '{}': cannot decode into {} (f32, f16 or bf16)",
                            path_, name, dtype_name(out)));
  const GgmlTypeInfo ti = *ggml_type_info(t.type);
  if (!ti.dequantizable)
    throw Error(
        fmt::format("[gguf {}] tensor '{}' has ggml type {}, which fitgrad cannot "
                    "dequantize (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q6_K)",
                    path_, name, ti.name));
  Tensor result = Tensor::empty(t.shape(), out);
  const uint8_t* src = tensor_data(name);
  const GgmlType type = t.ggml_type();
  if ((type == GgmlType::F32 && out == DType::f32) ||
      (type == GgmlType::F16 && out == DType::f16) ||
      (type == GgmlType::BF16 && out == DType::bf16)) {
    if (t.nbytes) std::memcpy(result.data_ptr(), src, t.nbytes);
    return result;
  }
  // Decode a bounded run of whole blocks at a time.
  const int64_t chunk =
      std::max<int64_t>(ti.block_size, (int64_t(1) << 16) / ti.block_size * ti.block_size);
  std::vector<float> scratch(out == DType::f32 ? 0 : size_t(std::min(chunk, t.numel)));
  for (int64_t start = 0; start < t.numel; start += chunk) {
    interruption_point();  // Note [Interruption points]: a large tensor decodes in chunks
    const int64_t n = std::min(chunk, t.numel - start);
    const uint8_t* block = src + start / ti.block_size * ti.type_size;
    if (out == DType::f32) {
      dequantize(type, block, result.data<float>() + start, n);
    } else if (out == DType::f16) {
      dequantize(type, block, scratch.data(), n);
      Half* dst = result.data<Half>() + start;
      for (int64_t i = 0; i < n; ++i) dst[i] = Half(scratch[size_t(i)]);
    } else {
      dequantize(type, block, scratch.data(), n);
      BFloat16* dst = result.data<BFloat16>() + start;
      for (int64_t i = 0; i < n; ++i) dst[i] = BFloat16(scratch[size_t(i)]);
    }
  }
  return result;
}

// A zero-copy tensor is writable (an optimizer may update a loaded weight in place): Note
// [Copy-on-write mapping] in io/mapped_file.h.
Tensor GgufFile::mapped_tensor(const std::string& name) const {
  const GgufTensorInfo& t = info(name);
  DType dtype;
  switch (t.ggml_type()) {
    case GgmlType::F32: dtype = DType::f32; break;
    case GgmlType::F16: dtype = DType::f16; break;
    case GgmlType::BF16: dtype = DType::bf16; break;
    default:
      throw Error(
          fmt::format("[gguf {}] tensor '{}' is {}: only F32, F16 and BF16 tensors can "
                      "be mapped without decoding (use tensor())",
                      path_, name, t.type_name()));
  }
  auto* data = reinterpret_cast<uint8_t*>(file_.writable_data()) + data_start_ + t.offset;
  if (reinterpret_cast<uintptr_t>(data) % element_size(dtype) != 0)
    throw Error(
        fmt::format("[gguf {}] tensor '{}' is not aligned to its element size; use "
                    "tensor() to copy it",
                    path_, name));
  return Tensor::from_storage(
      Storage::wrap(data, t.nbytes, [keep = file_]() mutable { keep = MappedFile(); }), t.shape(),
      dtype);
}

}  // namespace fitgrad::io
