// Python's operators on Jinja values (jinja_ops.h).
//
// Note [Jinja attribute lookup]
// `obj.name` in jinja2 (the sandbox's getattr) first asks Python for the attribute: a str,
// dict or list method of that name wins, so `message.items` is dict.items even when the dict
// has an "items" key; only when there is none does it look up obj["name"]. `obj[key]` is the
// other way round: the item first, then, for a string key, the attribute. What neither finds
// is undefined (a missing key or an index out of range is not an error), but any lookup on
// an undefined value is an error: `messages[0].foo.bar` fails when foo is missing. Names
// starting with "_" and the methods that modify (append, update, pop, ...) are refused as
// ImmutableSandboxedEnvironment refuses them. Integers are 64-bit here; a result that
// overflows is an error rather than a Python big integer.
#include "data/jinja_ops.h"

#include <cmath>

#include "data/jinja_builtins.h"
#include "data/jinja_text.h"
#include "tensor/error.h"

namespace fitgrad::data::jinja {
namespace {

const char* symbol(BinOp op) {
  switch (op) {
    case BinOp::add: return "+";
    case BinOp::sub: return "-";
    case BinOp::mul: return "*";
    case BinOp::div: return "/";
    case BinOp::floordiv: return "//";
    case BinOp::mod: return "%";
    case BinOp::pow: return "**";
    default: return "?";
  }
}

[[noreturn]] void unsupported(BinOp op, const Value& a, const Value& b) {
  throw Error(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", symbol(op),
                          a.type_name(), b.type_name()));
}

void check_overflow(bool overflow) {
  FG_CHECK(!overflow, "integer overflow (fitgrad's Jinja integers are 64-bit)");
}

Value repeat(const Value& seq, int64_t times) {
  const size_t n = times > 0 ? size_t(times) : 0;
  const size_t size = seq.is_string() ? seq.str().size() : seq.list().items.size();
  const size_t total = n == 0 || size == 0 ? 0 : size > SIZE_MAX / n ? SIZE_MAX : size * n;
  if (seq.is_string()) {
    check_text(total, "repeating a string");
    std::string out;
    out.reserve(seq.str().size() * n);
    for (size_t i = 0; i < n; ++i) out += seq.str();
    return seq.is_markup() ? Value::markup(std::move(out)) : Value::string(std::move(out));
  }
  check_items(total, "repeating a list");
  std::vector<Value> out;
  for (size_t i = 0; i < n; ++i)
    out.insert(out.end(), seq.list().items.begin(), seq.list().items.end());
  return seq.list().type == List::Type::tuple ? Value::tuple(std::move(out))
                                              : Value::list(std::move(out));
}

// Python's float divmod: the floor quotient and the remainder with the divisor's sign.
std::pair<double, double> float_divmod(double x, double y) {
  FG_CHECK(y != 0, "float division by zero");
  double mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0) {
    if ((y < 0) != (mod < 0)) mod += y, div -= 1.0;
  } else {
    mod = std::copysign(0.0, y);
  }
  double floordiv;
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
  return {floordiv, mod};
}

Value int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) check_overflow(__builtin_mul_overflow(result, base, &result));
    exp >>= 1;
    if (exp) check_overflow(__builtin_mul_overflow(base, base, &base));
  }
  return Value::integer(result);
}

bool is_sequence(const Value& v) { return v.is_list() && v.list().type != List::Type::generator; }

std::string element_hint(const Value& obj, const Value& key) {
  std::string k;
  append_repr(key, k);
  return fmt::format("{} object has no element {}", obj.type_name(), k);
}

std::string attribute_hint(const Value& obj, std::string_view name) {
  if (obj.is_none()) return fmt::format("'None' has no attribute '{}'", name);
  return fmt::format("'{} object' has no attribute '{}'", obj.type_name(), name);
}

}  // namespace

Value arithmetic(BinOp op, const Value& a, const Value& b) {
  if (a.is_undefined()) throw Error(a.undefined_hint());
  if (b.is_undefined()) throw Error(b.undefined_hint());
  if (a.is_number() && b.is_number()) {
    const bool ints = a.is_int() && b.is_int();
    const int64_t x = ints ? a.as_int() : 0, y = ints ? b.as_int() : 0;
    const double fx = a.as_real(), fy = b.as_real();
    int64_t r = 0;
    switch (op) {
      case BinOp::add:
        if (!ints) return Value::real(fx + fy);
        check_overflow(__builtin_add_overflow(x, y, &r));
        return Value::integer(r);
      case BinOp::sub:
        if (!ints) return Value::real(fx - fy);
        check_overflow(__builtin_sub_overflow(x, y, &r));
        return Value::integer(r);
      case BinOp::mul:
        if (!ints) return Value::real(fx * fy);
        check_overflow(__builtin_mul_overflow(x, y, &r));
        return Value::integer(r);
      case BinOp::div: FG_CHECK(fy != 0, "division by zero"); return Value::real(fx / fy);
      case BinOp::floordiv:
        if (ints) {
          FG_CHECK(y != 0, "integer division or modulo by zero");
          int64_t q = x / y;
          if (x % y != 0 && ((x < 0) != (y < 0))) --q;
          return Value::integer(q);
        }
        return Value::real(float_divmod(fx, fy).first);
      case BinOp::mod:
        if (ints) {
          FG_CHECK(y != 0, "integer division or modulo by zero");
          int64_t m = x % y;
          if (m != 0 && ((m < 0) != (y < 0))) m += y;
          return Value::integer(m);
        }
        return Value::real(float_divmod(fx, fy).second);
      case BinOp::pow:
        if (ints && y >= 0) return int_pow(x, y);
        FG_CHECK(!(fx == 0 && fy < 0), "0.0 cannot be raised to a negative power");
        FG_CHECK(!(fx < 0 && std::floor(fy) != fy),
                 "a negative number to a fractional power is complex, which Jinja values lack");
        if (const double p = std::pow(fx, fy);
            !std::isinf(p) || std::isinf(fx) || std::isinf(fy) || std::isnan(fx) || std::isnan(fy))
          return Value::real(p);
        // Python's float pow raises where a finite base and exponent overflow; * and + do not.
        throw Error(
            "numerical result out of range: the power overflows a float (Python "
            "raises OverflowError)");
      default: break;
    }
  }
  if (op == BinOp::add) {
    if (a.is_string() && b.is_string()) {
      check_text(a.str().size() + b.str().size(), "adding strings");
      if (!a.is_markup() && !b.is_markup()) return Value::string(a.str() + b.str());
      return Value::markup((a.is_markup() ? a.str() : html_escape(a.str())) +
                           (b.is_markup() ? b.str() : html_escape(b.str())));
    }
    if (is_sequence(a) && is_sequence(b) && a.list().type == b.list().type) {
      check_items(a.list().items.size() + b.list().items.size(), "adding lists");
      std::vector<Value> out = a.list().items;
      out.insert(out.end(), b.list().items.begin(), b.list().items.end());
      return a.list().type == List::Type::tuple ? Value::tuple(std::move(out))
                                                : Value::list(std::move(out));
    }
    if (a.is_string())
      throw Error(fmt::format("can only concatenate str (not \"{}\") to str", b.type_name()));
  }
  if (op == BinOp::mul) {
    if ((a.is_string() || is_sequence(a)) && b.is_int()) return repeat(a, b.as_int());
    if (a.is_int() && (b.is_string() || is_sequence(b))) return repeat(b, a.as_int());
  }
  if (op == BinOp::mod && a.is_string())
    throw Error("printf-style string formatting (str % args) is not supported");
  unsupported(op, a, b);
}

bool compare(BinOp op, const Value& a, const Value& b) {
  switch (op) {
    case BinOp::eq: return equal(a, b);
    case BinOp::ne: return !equal(a, b);
    case BinOp::lt: return less(a, b);
    case BinOp::gt: return less(b, a);
    case BinOp::le: return less(a, b) || equal(a, b);
    case BinOp::ge: return less(b, a) || equal(a, b);
    case BinOp::in: return contains(b, a);
    case BinOp::not_in: return !contains(b, a);
    default: throw Error("not a comparison");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::undefined: return false;
    case Value::Kind::string:
      FG_CHECK(item.is_string(), "'in <string>' requires string as left operand, not {}",
               item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::list:
      for (const Value& x : container.list().items)
        if (equal(x, item)) return true;
      return false;
    case Value::Kind::dict:
      FG_CHECK(!item.is_list() && !item.is_dict(), "unhashable type: '{}'", item.type_name());
      return container.dict().find(item) != nullptr;
    default:
      throw Error(fmt::format("argument of type '{}' is not iterable", container.type_name()));
  }
}

Value negate(const Value& v) {
  if (v.is_undefined()) throw Error(v.undefined_hint());
  if (v.is_int()) {
    check_overflow(v.as_int() == INT64_MIN);
    return Value::integer(-v.as_int());
  }
  if (v.is_number()) return Value::real(-v.as_real());
  throw Error(fmt::format("bad operand type for unary -: '{}'", v.type_name()));
}

Value get_attribute(const Value& obj, std::string_view name) {
  switch (obj.kind()) {
    case Value::Kind::undefined: throw Error(obj.undefined_hint());
    case Value::Kind::object: {
      const Value v = obj.object().attr(name);
      return v.is_undefined() ? Value::undefined(attribute_hint(obj, name)) : v;
    }
    case Value::Kind::string:
    case Value::Kind::list:
    case Value::Kind::dict: {
      if (!name.starts_with("_"))
        if (std::optional<Value> m = method(obj, name)) return *m;
      if (obj.is_dict())
        if (const Value* v = obj.dict().find(name)) return *v;
      return Value::undefined(attribute_hint(obj, name));
    }
    default: return Value::undefined(attribute_hint(obj, name));
  }
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw Error(obj.undefined_hint());
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if ((is_sequence(obj) || obj.is_string()) && key.is_int()) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      const std::string& s = obj.str();
      if (is_ascii(s)) {
        if (i < 0) i += int64_t(s.size());
        if (i >= 0 && i < int64_t(s.size())) return Value::string(s.substr(size_t(i), 1));
      } else {
        const std::vector<size_t> at = code_point_offsets(s);
        const int64_t n = int64_t(at.size()) - 1;
        if (i < 0) i += n;
        if (i >= 0 && i < n)
          return Value::string(s.substr(at[size_t(i)], at[size_t(i) + 1] - at[size_t(i)]));
      }
      return Value::undefined("string index out of range");
    }
    const auto& items = obj.list().items;
    if (i < 0) i += int64_t(items.size());
    if (i >= 0 && i < int64_t(items.size())) return items[size_t(i)];
    return Value::undefined(element_hint(obj, key));
  }
  if (key.is_string()) return get_attribute(obj, key.str());
  return Value::undefined(element_hint(obj, key));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) throw Error(obj.undefined_hint());
  const auto bound_ok = [](const Value& v) { return v.is_none() || v.is_int(); };
  if (!(is_sequence(obj) || obj.is_string()) || !bound_ok(start) || !bound_ok(stop) ||
      !bound_ok(step))
    return Value::undefined(fmt::format("{} object cannot be sliced that way", obj.type_name()));
  const int64_t st = step.is_none() ? 1 : step.as_int();
  FG_CHECK(st != 0, "slice step cannot be zero");
  std::vector<size_t> at;  // code point offsets of a non-ASCII string
  const bool text = obj.is_string();
  const bool ascii = text && is_ascii(obj.str());
  if (text && !ascii) at = code_point_offsets(obj.str());
  const int64_t n = text ? (ascii ? int64_t(obj.str().size()) : int64_t(at.size()) - 1)
                         : int64_t(obj.list().items.size());
  const auto adjust = [&](const Value& v, int64_t fallback, int64_t lo, int64_t hi) {
    if (v.is_none()) return fallback;
    int64_t i = v.as_int();
    if (i < 0) i += n;
    return i < lo ? lo : i > hi ? hi : i;
  };
  const int64_t first = st > 0 ? adjust(start, 0, 0, n) : adjust(start, n - 1, -1, n - 1);
  const int64_t last = st > 0 ? adjust(stop, n, 0, n) : adjust(stop, -1, -1, n - 1);
  std::vector<int64_t> picks;
  for (int64_t i = first; st > 0 ? i < last : i > last; i += st) picks.push_back(i);
  if (text) {
    std::string out;
    for (const int64_t i : picks) {
      if (ascii)
        out += obj.str()[size_t(i)];
      else
        out.append(obj.str(), at[size_t(i)], at[size_t(i) + 1] - at[size_t(i)]);
    }
    return Value::string(std::move(out));
  }
  std::vector<Value> out;
  out.reserve(picks.size());
  for (const int64_t i : picks) out.push_back(obj.list().items[size_t(i)]);
  return obj.list().type == List::Type::tuple ? Value::tuple(std::move(out))
                                              : Value::list(std::move(out));
}

}  // namespace fitgrad::data::jinja
