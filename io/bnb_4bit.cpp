// bitsandbytes 4-bit weights in safetensors (see bnb_4bit.h).
#include "io/bnb_4bit.h"

#include <fmt/format.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "io/json_depth.h"
#include "tensor/error.h"
#include "tensor/quant/dynamic_map.h"

namespace fitgrad::io {
namespace {
using nlohmann::json;

const char* type_name(quant::FourBitType t) { return t == quant::FourBitType::nf4 ? "nf4" : "fp4"; }

std::string state_key(const std::string& name, quant::FourBitType t) {
  return name + ".quant_state.bitsandbytes__" + type_name(t);
}

template <size_t N>
Tensor f32_vector(const std::array<float, N>& v) {
  return Tensor::from_vector(std::vector<float>(v.begin(), v.end()), {int64_t(N)}, DType::f32);
}

// The torch name of a dtype, as transformers writes it in the quant state.
const char* torch_dtype(DType d) {
  switch (d) {
    case DType::bf16: return "bfloat16";
    case DType::f16: return "float16";
    default: return "float32";
  }
}
DType from_torch_dtype(const std::string& s, const std::string& where) {
  if (s == "bfloat16") return DType::bf16;
  if (s == "float16") return DType::f16;
  if (s == "float32") return DType::f32;
  throw Error(fmt::format("{}: unknown dtype '{}' in the quant state", where, s));
}

}  // namespace

std::vector<std::pair<std::string, Tensor>> bnb_4bit_entries(const std::string& name,
                                                             const ops::FourBit& q, DType dtype) {
  const int64_t bytes = q.packed.numel();
  std::vector<std::pair<std::string, Tensor>> out;
  out.emplace_back(name, q.packed.reshape({bytes, 1}));
  const bool nested = q.nested.defined();
  out.emplace_back(name + ".absmax", nested ? q.nested : q.absmax);
  out.emplace_back(name + ".quant_map", f32_vector(quant::four_bit_values(q.options.type)));
  json state = {{"quant_type", type_name(q.options.type)},
                {"blocksize", q.options.blocksize},
                {"dtype", torch_dtype(dtype)},
                {"shape", q.shape}};
  if (nested) {
    out.emplace_back(name + ".nested_absmax", q.absmax2);
    out.emplace_back(name + ".nested_quant_map", f32_vector(quant::dynamic_map_signed()));
    state["nested_blocksize"] = quant::kNestedBlocksize;
    state["nested_dtype"] = "float32";
    state["nested_offset"] = double(q.offset.to(Device::cpu()).data<float>()[0]);
  }
  const std::string text = state.dump();
  std::vector<uint8_t> chars(text.begin(), text.end());
  out.emplace_back(state_key(name, q.options.type),
                   Tensor::from_vector(chars, {int64_t(chars.size())}, DType::u8));
  return out;
}

bool is_bnb_4bit(const SafetensorsFile& file, const std::string& name) {
  return file.has(state_key(name, quant::FourBitType::nf4)) ||
         file.has(state_key(name, quant::FourBitType::fp4));
}

ops::FourBit read_bnb_4bit(const SafetensorsFile& file, const std::string& name, DType* dtype) {
  const std::string where = fmt::format("[bnb 4-bit {}] {}", file.path(), name);
  auto get = [&](const std::string& key) {
    FG_CHECK(file.has(key), "{}: '{}' is missing", where, key);
    return file.tensor(key);
  };
  quant::FourBitType type = quant::FourBitType::nf4;
  if (!file.has(state_key(name, type))) type = quant::FourBitType::fp4;
  const Tensor state_bytes = get(state_key(name, type));
  FG_CHECK(state_bytes.dtype() == DType::u8, "{}: the quant state must be u8", where);
  const Tensor s = state_bytes.contiguous();
  json state;
  try {
    state = parse_json<json>(
        std::string_view(reinterpret_cast<const char*>(s.data<uint8_t>()), size_t(s.numel())),
        fmt::format("{}: the quant state", where));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: the quant state is not JSON ({})", where, e.what()));
  }
  ops::FourBit q;
  try {
    FG_CHECK(state.at("quant_type").get<std::string>() == type_name(type),
             "{}: quant_type '{}' in an entry named for {}", where,
             state.at("quant_type").get<std::string>(), type_name(type));
    q.options.type = type;
    q.options.blocksize = state.at("blocksize").get<int64_t>();
    q.shape = state.at("shape").get<Shape>();
    if (dtype) *dtype = from_torch_dtype(state.value("dtype", std::string("float32")), where);
    q.options.double_quant = state.contains("nested_offset");
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: {}", where, e.what()));
  }
  quant::check_four_bit_blocksize(q.options.blocksize, "bnb 4-bit");
  const int64_t n = q.numel(), blocks = quant::blocks_of(n, q.options.blocksize);
  q.packed = get(name).reshape({-1});
  FG_CHECK(q.packed.dtype() == DType::u8 && q.packed.numel() == (n + 1) / 2,
           "{}: the packed weight has {} {} elements, expected {} u8 for shape {}", where,
           q.packed.numel(), dtype_name(q.packed.dtype()), (n + 1) / 2, shape_str(q.shape));
  const Tensor map = get(name + ".quant_map").to(DType::f32).contiguous();
  const auto& values = quant::four_bit_values(type);
  FG_CHECK(
      map.numel() == 16 && std::memcmp(map.data<float>(), values.data(), sizeof(float) * 16) == 0,
      "{}: quant_map is not bitsandbytes' {} map", where, type_name(type));
  const Tensor absmax = get(name + ".absmax");
  FG_CHECK(absmax.numel() == blocks, "{}: absmax has {} elements, expected {} blocks", where,
           absmax.numel(), blocks);
  if (!q.options.double_quant) {
    FG_CHECK(absmax.dtype() == DType::f32, "{}: absmax must be f32 without double quantization",
             where);
    q.absmax = absmax;
    return q;
  }
  FG_CHECK(absmax.dtype() == DType::u8, "{}: a double-quantized absmax must be u8", where);
  q.nested = absmax;
  q.absmax2 = get(name + ".nested_absmax").to(DType::f32);
  FG_CHECK(q.absmax2.numel() == quant::blocks_of(blocks, quant::kNestedBlocksize),
           "{}: nested_absmax has {} elements, expected {}", where, q.absmax2.numel(),
           quant::blocks_of(blocks, quant::kNestedBlocksize));
  const Tensor nested_map = get(name + ".nested_quant_map").to(DType::f32).contiguous();
  FG_CHECK(nested_map.numel() == 256 &&
               std::memcmp(nested_map.data<float>(), quant::dynamic_map_signed().data(),
                           sizeof(float) * 256) == 0,
           "{}: nested_quant_map is not the signed dynamic map", where);
  FG_CHECK(state.value("nested_blocksize", int64_t(256)) == quant::kNestedBlocksize,
           "{}: nested_blocksize must be 256", where);
  q.offset = Tensor::full({1}, state.at("nested_offset").get<double>(), DType::f32);
  return q;
}

}  // namespace fitgrad::io
