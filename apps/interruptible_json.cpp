// parse_json_interruptibly (interruptible_json.h).
#include "apps/interruptible_json.h"

#include <cstdint>

#include "tensor/interrupt.h"

namespace fitgrad::apps {
namespace {

using json = nlohmann::json;

// Forwards every SAX event to the DOM builder, reading the interrupt flag on the way (a
// relaxed load; every 4096th event, so the parse costs the same).
class InterruptibleSax {
 public:
  explicit InterruptibleSax(json& root) : dom_(root) {}
  bool null() { return tick(), dom_.null(); }
  bool boolean(bool v) { return tick(), dom_.boolean(v); }
  bool number_integer(json::number_integer_t v) { return tick(), dom_.number_integer(v); }
  bool number_unsigned(json::number_unsigned_t v) { return tick(), dom_.number_unsigned(v); }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return tick(), dom_.number_float(v, s);
  }
  bool string(json::string_t& v) { return tick(), dom_.string(v); }
  bool binary(json::binary_t& v) { return tick(), dom_.binary(v); }
  bool start_object(std::size_t n) { return tick(), dom_.start_object(n); }
  bool key(json::string_t& v) { return dom_.key(v); }
  bool end_object() { return dom_.end_object(); }
  bool start_array(std::size_t n) { return tick(), dom_.start_array(n); }
  bool end_array() { return dom_.end_array(); }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    return dom_.parse_error(position, token, e);
  }

 private:
  void tick() {
    if ((++events_ & 4095) == 0) interruption_point();
  }
  nlohmann::detail::json_sax_dom_parser<json> dom_;
  uint64_t events_ = 0;
};

}  // namespace

json parse_json_interruptibly(std::istream& in) {
  json doc;
  InterruptibleSax sax(doc);
  json::sax_parse(in, &sax);
  return doc;
}

}  // namespace fitgrad::apps
