// libFuzzer target for the instruction-data reader (data/sft_records.h, data/sft_formats.h):
// the input is a dataset file, read as .jsonl (one record a line) or, when it starts with
// '[', as a .json array. It is read twice, once throwing at the first bad record and once
// counting bad records (--skip_bad_examples); each conversational example then renders
// through a ChatML template, as a run encodes it, and each preference record splits into its
// answers. fitgrad::Error is the expected outcome for a bad file or record; anything else (a
// crash, a stack overflow past Note [JSON nesting bound], a sanitizer report, a nlohmann
// exception leaking out) is a bug. The seeds are the records of tests/golden/sft/records,
// and sft_records.dict holds their keys and roles.
#include <cstddef>
#include <cstdint>
#include <optional>

#include "data/chat_template.h"
#include "data/sft_records.h"
#include "fuzz/small_stack.h"
#include "fuzz/temp_file.h"
#include "tensor/error.h"

namespace {

constexpr const char* kChatMl =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}{% else %}"
    "{{ message['content'] | tojson }}{% endif %}{{ '<|im_end|>\\n' }}{% endfor %}"
    "{% if tools %}{{ tools | tojson }}{% endif %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

void use(const fitgrad::data::SftExample& ex) {
  static const fitgrad::data::ChatTemplate chat =
      fitgrad::data::ChatTemplate::parse(kChatMl, "chatml");
  std::tm now{};
  try {
    if (ex.format == fitgrad::data::SftFormat::preference) {
      fitgrad::data::preference_answers(ex);
    } else if (ex.conversational()) {
      nlohmann::ordered_json extra = nlohmann::ordered_json::object();
      if (!ex.tools.is_null()) extra["tools"] = ex.tools;
      chat.render(fitgrad::data::chat_context(ex.messages, false, extra), now);
    }
  } catch (const fitgrad::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const fitgrad::fuzz::TempFile jsonl("sft.jsonl"), array("sft.json");
  const std::string& path = (size > 0 && data[0] == '[' ? array : jsonl).write(data, size);
  fitgrad::fuzz::on_small_stack([&] {
    for (const bool skip : {false, true}) {
      fitgrad::data::SftReadOptions options;
      options.skip_bad_examples = skip;
      try {
        fitgrad::data::SftReader reader(path, options);
        while (std::optional<fitgrad::data::SftExample> ex = reader.next()) use(*ex);
      } catch (const fitgrad::Error&) {
      }
    }
  });
  return 0;
}
