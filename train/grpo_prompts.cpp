// read_grpo_prompts (grpo_prompts.h).
#include "train/grpo_prompts.h"

#include <fmt/format.h>

#include <optional>
#include <sstream>

#include "io/json_depth.h"
#include "io/whole_file.h"
#include "tensor/error.h"
#include "train/chat_prompt.h"

namespace fitgrad::train {

std::vector<GrpoPrompt> read_grpo_prompts(const std::string& path, const LoadedModel& lm,
                                          const std::string& chat_template_file,
                                          int64_t max_completion_length) {
  FG_CHECK(lm.tokenizer, "[grpo] prompt records need a tokenizer; the model has none");
  std::istringstream lines(io::read_whole_file("grpo", "prompt records", path));
  std::vector<GrpoPrompt> prompts;
  std::optional<data::ChatTemplate> chat;
  const int64_t context = lm.model->config().max_position_embeddings;
  std::string line;
  for (int64_t n = 1; std::getline(lines, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{} line {}", path, n);
    nlohmann::ordered_json j;
    try {
      j = io::parse_json<nlohmann::ordered_json>(line, fmt::format("[grpo] {}:", where));
    } catch (const nlohmann::json::parse_error& e) {
      throw Error(fmt::format("[grpo] {} is not JSON: {}", where, e.what()));
    }
    FG_CHECK(j.is_object() && j.contains("prompt"),
             "[grpo] {} has no \"prompt\": each record is an object with a prompt (text or a "
             "list of messages) and the columns its rewards read",
             where);
    const nlohmann::ordered_json& prompt = j.at("prompt");
    GrpoPrompt p;
    if (prompt.is_string()) {
      p.text = prompt.get<std::string>();
    } else {
      FG_CHECK(prompt.is_array(),
               "[grpo] {}: \"prompt\" is neither text nor a list of messages ({{\"role\", "
               "\"content\"}})",
               where);
      if (!chat) chat = model_chat_template(lm, chat_template_file, "the model", "train");
      p.text = chat_prompt(*chat, conversation_of(prompt, where, "train"), *lm.tokenizer);
    }
    p.ids = lm.tokenizer->encode(p.text, /*allow_special=*/true);
    FG_CHECK(!p.ids.empty(), "[grpo] {}: the prompt has no tokens", where);
    FG_CHECK(int64_t(p.ids.size()) + max_completion_length - 1 <= context,
             "[grpo] {}: {} prompt tokens + --max_completion_length {} do not fit the model's "
             "context of {} positions",
             where, p.ids.size(), max_completion_length, context);
    for (const auto& [key, value] : j.items())
      if (key != "prompt") p.row[key] = value;
    prompts.push_back(std::move(p));
  }
  FG_CHECK(!prompts.empty(), "[grpo] {} holds no prompt record", path);
  return prompts;
}

}  // namespace fitgrad::train
