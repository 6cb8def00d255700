// dump_interruptibly (json_dump.h).
#include "tensor/memory/json_dump.h"

#include <memory>

#include "tensor/interrupt.h"

namespace fitgrad {
namespace {

class InterruptibleOutput : public nlohmann::detail::output_adapter_protocol<char> {
 public:
  explicit InterruptibleOutput(std::string& out) : out_(out) {}
  void write_character(char c) override {
    out_.push_back(c);
    check();
  }
  void write_characters(const char* s, std::size_t n) override {
    out_.append(s, n);
    check();
  }

 private:
  void check() {
    if (out_.size() < next_) return;
    next_ = out_.size() + (size_t(1) << 16);
    interruption_point();
  }
  std::string& out_;
  size_t next_ = size_t(1) << 16;
};

}  // namespace

std::string dump_interruptibly(const nlohmann::json& doc, nlohmann::json::error_handler_t handler) {
  std::string out;
  nlohmann::detail::serializer<nlohmann::json> s(std::make_shared<InterruptibleOutput>(out), ' ',
                                                 handler);
  s.dump(doc, /*pretty_print=*/false, /*ensure_ascii=*/false, /*indent_step=*/0);
  return out;
}

}  // namespace fitgrad
