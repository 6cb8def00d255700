// parse_streamed_json (streamed_json.h).
#include "io/memviz/streamed_json.h"

#include <cstdint>
#include <memory>
#include <optional>

#include "tensor/interrupt.h"

namespace fitgrad::io {
namespace {

using json = nlohmann::json;
using Dom = nlohmann::detail::json_sax_dom_parser<json>;

class Splitter {
 public:
  Splitter(json& root, const std::vector<JsonPath>& streamed,
           const std::function<void(size_t, const json&, size_t, const json&)>& on_element)
      : root_(root),
        dom_(root),
        streamed_(streamed),
        on_element_(on_element),
        counts_(streamed.size(), 0) {}

  bool null() {
    return value([](Dom& d) { return d.null(); });
  }
  bool boolean(bool v) {
    return value([&](Dom& d) { return d.boolean(v); });
  }
  bool number_integer(json::number_integer_t v) {
    return value([&](Dom& d) { return d.number_integer(v); });
  }
  bool number_unsigned(json::number_unsigned_t v) {
    return value([&](Dom& d) { return d.number_unsigned(v); });
  }
  bool number_float(json::number_float_t v, const json::string_t& s) {
    return value([&](Dom& d) { return d.number_float(v, s); });
  }
  bool string(json::string_t& v) {
    return value([&](Dom& d) { return d.string(v); });
  }
  bool binary(json::binary_t& v) {
    return value([&](Dom& d) { return d.binary(v); });
  }
  bool start_object(std::size_t n) {
    return open(true, [&](Dom& d) { return d.start_object(n); });
  }
  bool start_array(std::size_t n) {
    return open(false, [&](Dom& d) { return d.start_array(n); });
  }
  bool end_object() {
    return close([](Dom& d) { return d.end_object(); });
  }
  bool end_array() {
    return close([](Dom& d) { return d.end_array(); });
  }
  bool key(json::string_t& k) {
    if (element_dom_) return element_dom_->key(k);
    levels_.back().key = k;
    return dom_.key(k);
  }
  template <class Exception>
  bool parse_error(std::size_t position, const std::string& token, const Exception& e) {
    return dom_.parse_error(position, token, e);
  }

 private:
  struct Level {
    bool object;
    std::string key;  // an object's key being read
  };

  void tick() {
    if ((++values_ & 4095) == 0) interruption_point();
  }

  // The streamed array whose element starts here, if any.
  std::optional<size_t> streamed_here() const {
    for (size_t p = 0; p < streamed_.size(); ++p) {
      const JsonPath& path = streamed_[p];
      if (levels_.size() != path.size() + 1 || levels_.back().object) continue;
      bool match = true;
      for (size_t i = 0; i < path.size() && match; ++i)
        match = levels_[i].object && levels_[i].key == path[i];
      if (match) return p;
    }
    return std::nullopt;
  }

  template <class F>
  bool begin_element(size_t path, F&& event) {
    path_ = path;
    element_ = json();
    element_dom_ = std::make_unique<Dom>(element_);
    return event(*element_dom_);
  }

  void deliver() {
    element_dom_.reset();
    on_element_(path_, element_, counts_[path_]++, root_);
    element_ = json();
  }

  template <class F>
  bool value(F&& event) {
    tick();
    if (element_dom_) return event(*element_dom_);
    if (const auto p = streamed_here()) {
      const bool ok = begin_element(*p, event);
      deliver();
      return ok;
    }
    return event(dom_);
  }

  template <class F>
  bool open(bool object, F&& event) {
    tick();
    if (element_dom_) {
      ++depth_;
      return event(*element_dom_);
    }
    if (const auto p = streamed_here()) {
      depth_ = 1;
      return begin_element(*p, event);
    }
    levels_.push_back({object, ""});
    return event(dom_);
  }

  template <class F>
  bool close(F&& event) {
    if (element_dom_) {
      const bool ok = event(*element_dom_);
      if (--depth_ == 0) deliver();
      return ok;
    }
    levels_.pop_back();
    return event(dom_);
  }

  const json& root_;  // the kept document as parsed so far
  Dom dom_;
  const std::vector<JsonPath>& streamed_;
  const std::function<void(size_t, const json&, size_t, const json&)>& on_element_;
  std::vector<size_t> counts_;  // elements delivered per path
  std::vector<Level> levels_;   // the open containers of the kept document
  json element_;                // the element being parsed
  std::unique_ptr<Dom> element_dom_;
  size_t path_ = 0;
  int depth_ = 0;  // open containers of the element
  uint64_t values_ = 0;
};

}  // namespace

json parse_streamed_json(
    std::istream& in, const std::vector<JsonPath>& streamed,
    const std::function<void(size_t, const json&, size_t, const json&)>& on_element) {
  json root;
  Splitter sax(root, streamed, on_element);
  json::sax_parse(in, &sax);
  return root;
}

}  // namespace fitgrad::io
