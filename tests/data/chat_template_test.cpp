// Chat templates (data/chat_template.h) against Python's jinja2 in transformers' environment:
// every real template in tests/golden/chat_templates (Llama 2/3.1/3.2, Qwen 2.5/3, Mistral,
// Gemma 2/3, Phi-3/3.5/4, SmolLM2, Zephyr, DeepSeek, Hermes, Command R+, Granite,
// Functionary) over every conversation, with and without the generation prompt, and the
// synthetic templates that test one construct each, must give jinja2's text and
// {% generation %} spans, or fail where jinja2 fails (with the template's message for
// raise_exception) (tests/golden/gen_chat_template_golden.py). Unsupported constructs must
// be errors that name them and their line.
#include "data/chat_template.h"

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "data/jinja_text.h"

namespace fitgrad::data {
namespace {

using json = nlohmann::ordered_json;

const std::string kDir = std::string(FITGRAD_GOLDEN_DIR) + "/chat_templates";

const json& expected() {
  static const json j = json::parse(std::ifstream(kDir + "/expected.json"));
  return j;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << path;
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::tm golden_now() {
  const json& n = expected().at("now");
  std::tm t{};
  t.tm_year = n.at("year").get<int>() - 1900;
  t.tm_mon = n.at("month").get<int>() - 1;
  t.tm_mday = n.at("day").get<int>();
  t.tm_hour = n.at("hour").get<int>();
  t.tm_min = n.at("minute").get<int>();
  t.tm_sec = n.at("second").get<int>();
  t.tm_wday = n.at("wday").get<int>();
  t.tm_yday = n.at("yday").get<int>();
  return t;
}

const ChatTemplate& template_named(const std::string& name) {
  static std::map<std::string, ChatTemplate> cache;
  if (const auto it = cache.find(name); it != cache.end()) return it->second;
  const json& spec = expected().at("templates").at(name);
  const std::string source = spec.contains("file")
                                 ? read_file(kDir + "/" + spec.at("file").get<std::string>())
                                 : spec.at("source").get<std::string>();
  return cache.emplace(name, ChatTemplate::parse(source, name)).first->second;
}

// The context of one golden case, as the generator built it.
json case_context(const json& c) {
  const json& spec = expected().at("templates").at(c.at("template").get<std::string>());
  const json& conv = expected().at("conversations").at(c.at("conversation").get<std::string>());
  json extra = json::object();
  if (c.value("probe", false))
    for (const auto& [k, v] : expected().at("probe").items()) extra[k] = v;
  for (const auto& [k, v] : spec.at("extra").items()) extra[k] = v;
  if (!c.value("probe", false)) {
    if (conv.contains("tools")) extra["tools"] = conv.at("tools");
    if (conv.contains("extra"))
      for (const auto& [k, v] : conv.at("extra").items()) extra[k] = v;
  }
  return chat_context(conv.at("messages"), c.at("add_generation_prompt").get<bool>(), extra);
}

// Python's code point offset into `text` as a byte offset.
size_t byte_offset(const std::string& text, size_t code_points) {
  const std::vector<size_t> at = jinja::code_point_offsets(text);
  return at.at(code_points);
}

std::string label(const json& c) {
  return c.at("template").get<std::string>() + " / " + c.at("conversation").get<std::string>() +
         (c.at("add_generation_prompt").get<bool>() ? " / generation prompt" : "");
}

// One golden case; returns whether it matched.
bool check_case(const json& c) {
  const ChatTemplate& t = template_named(c.at("template").get<std::string>());
  const json context = case_context(c);
  const std::string what = label(c);
  if (c.contains("error")) {
    const std::string kind = c.at("error").get<std::string>();
    try {
      const std::string text = t.render(context, golden_now()).text;
      ADD_FAILURE() << what << ": jinja2 raised " << kind << " ("
                    << c.at("message").get<std::string>() << "), fitgrad rendered:\n"
                    << text;
      return false;
    } catch (const ChatTemplateRaised& e) {
      EXPECT_EQ(kind, "TemplateError") << what << ": " << e.what();
      EXPECT_EQ(e.message(), c.at("message").get<std::string>()) << what;
      return kind == "TemplateError" && e.message() == c.at("message").get<std::string>();
    } catch (const Error& e) {
      EXPECT_NE(kind, "TemplateError") << what << ": " << e.what();
      return kind != "TemplateError";
    }
  }
  ChatTemplate::Rendered r;
  try {
    r = t.render(context, golden_now());
  } catch (const std::exception& e) {
    ADD_FAILURE() << what << ": " << e.what();
    return false;
  }
  const std::string want = c.at("text").get<std::string>();
  EXPECT_EQ(r.text, want) << what;
  std::vector<std::pair<size_t, size_t>> spans;
  for (const json& s : c.value("spans", json::array()))
    spans.emplace_back(byte_offset(want, s[0].get<size_t>()),
                       byte_offset(want, s[1].get<size_t>()));
  EXPECT_EQ(r.generation_spans, spans) << what;
  return r.text == want && r.generation_spans == spans;
}

TEST(ChatTemplate, EveryGoldenCaseMatchesJinja2) {
  size_t passed = 0, total = 0;
  for (const json& c : expected().at("cases")) {
    ++total;
    passed += check_case(c);
  }
  EXPECT_EQ(passed, total);
  std::cout << "[chat templates] " << passed << " of " << total << " golden cases match jinja2\n";
}

TEST(ChatTemplate, GoldenDataCoversTheRealTemplatesAndTheirFailures) {
  std::map<std::string, int> rendered, raised;
  for (const json& c : expected().at("cases")) {
    const std::string name = c.at("template").get<std::string>();
    if (c.contains("text")) ++rendered[name];
    if (c.value("error", "") == "TemplateError") ++raised[name];
  }
  for (const char* name :
       {"llama31", "llama32", "qwen25", "qwen3", "mistral_v3", "mistral_v1", "gemma2", "gemma3",
        "phi3", "smollm2", "zephyr", "llama2", "deepseek_r1"})
    EXPECT_GT(rendered[name], 4) << name;
  for (const char* name : {"gemma2", "mistral_v1", "mistral_v3", "llama2", "raise"})
    EXPECT_GT(raised[name], 0) << name;
}

TEST(ChatTemplate, GenerationSpansMarkTheAssistantText) {
  const ChatTemplate t = template_named("chatml_generation");
  const json messages = json::parse(R"([{"role": "user", "content": "Hi"},
                                        {"role": "assistant", "content": "Héllo!"}])");
  const ChatTemplate::Rendered r = t.render(chat_context(messages, false));
  ASSERT_EQ(r.generation_spans.size(), 1u);
  const auto [start, end] = r.generation_spans[0];
  EXPECT_EQ(r.text.substr(start, end - start), "Héllo!<|im_end|>");
}

TEST(ChatTemplate, ChatContextPassesWhatTransformersPasses) {
  const json messages = json::parse(R"([{"role": "user", "content": "Hi"}])");
  const json context =
      chat_context(messages, true, {{"bos_token", "<s>"}, {"tools", json::array()}});
  std::vector<std::string> keys;
  for (const auto& [k, v] : context.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"messages", "tools", "documents",
                                            "add_generation_prompt", "bos_token"}));
  EXPECT_TRUE(context.at("documents").is_null());
  EXPECT_TRUE(chat_context(messages, false).at("tools").is_null());
  const ChatTemplate t = ChatTemplate::parse(
      "{{ tools is defined }} {{ tools is none }} {{ add_generation_prompt }} {{ bos_token }}",
      "t");
  EXPECT_EQ(t.render(chat_context(messages, false, {{"bos_token", "<s>"}})).text,
            "True True False <s>");
}

TEST(ChatTemplate, AParsedTemplateRendersManyTimes) {
  const ChatTemplate t = ChatTemplate::parse(
      "{% for m in messages %}{{ m.content }}{% if not loop.last %},{% endif %}{% endfor %}", "t");
  const ChatTemplate copy = t;
  json messages = json::array();
  for (int i = 0; i < 5; ++i) {
    messages.push_back({{"role", "user"}, {"content", std::to_string(i)}});
    std::string want;
    for (int k = 0; k <= i; ++k) {
      if (k) want += ',';
      want += std::to_string(k);
    }
    EXPECT_EQ(t.render(chat_context(messages, false)).text, want);
    EXPECT_EQ(copy.render(chat_context(messages, false)).text, want);
  }
}

TEST(ChatTemplate, StrftimeNowFormatsTheLocalTime) {
  const ChatTemplate t = ChatTemplate::parse("{{ strftime_now('%Y') }}", "t");
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  EXPECT_EQ(t.render(json::object()).text, std::to_string(local.tm_year + 1900));
}

// Whatever cannot be rendered is an error naming the construct and the template's line.
TEST(ChatTemplate, UnsupportedConstructsAreErrorsNamingTheLine) {
  const struct {
    const char* source;
    const char* message;
  } cases[] = {
      {"line one\n{% frobnicate %}", "line 2: unknown tag 'frobnicate'"},
      {"{% do x.append(1) %}", "line 1: unknown tag 'do'"},
      {"\n\n{% include 'other.jinja' %}", "line 3: unsupported tag 'include'"},
      {"{% extends 'base' %}", "line 1: unsupported tag 'extends'"},
      {"{% macro m() %}{% endmacro %}\n{% call m() %}x{% endcall %}",
       "line 2: unsupported tag 'call'"},
      {"a\nb\n{{ x | frobnicate }}", "line 3: unknown filter 'frobnicate'"},
      {"{{ x | groupby('a') }}", "line 1: unknown filter 'groupby'"},
      {"\n{% if x is frobnicated %}{% endif %}", "line 2: unknown test 'frobnicated'"},
      {"{{ s.frobnicate() }}", "line 1: unknown method 'frobnicate'"},
      {"\n\n\n{{ lipsum(2) }}", "line 4: unknown function 'lipsum'"},
      {"{% for x in y recursive %}{% endfor %}", "line 1: unsupported recursive for loop"},
      {"{% break %}", "line 1: 'break' outside a for loop"},
      {"{% if x %}\nopen", "line 2: unexpected end of template; expected 'elif', 'else', 'endif'"},
      {"{% endfor %}", "line 1: unexpected tag 'endfor'"},
      {"{{ 'unterminated }}", "line 1: unterminated string"},
      {"{# never closed", "line 1: missing end of comment tag"},
      {"{{ f(*args) }}", "line 1: unsupported *args / **kwargs in a call"},
      {"{{ (1 }}", "line 1: unexpected '}'"},
  };
  for (const auto& c : cases) {
    try {
      ChatTemplate::parse(c.source, "bad");
      ADD_FAILURE() << "parsed: " << c.source;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("[chat template bad] ") + c.message),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ChatTemplate, RenderErrorsNameTheLine) {
  const struct {
    const char* source;
    const char* message;
  } cases[] = {
      {"ok\n\n{{ missing + 1 }}", "line 3: 'missing' is undefined"},
      {"{% set d = {} %}\n{{ d.a.b }}", "line 2: 'dict object' has no attribute 'a'"},
      {"\n{{ 'a' + 1 }}", "line 2: can only concatenate str (not \"int\") to str"},
      {"{{ [].append(1) }}", "line 1: access to attribute 'append' of 'list' object is unsafe."},
      {"{{ 1 // 0 }}", "line 1: integer division or modulo by zero"},
      {"{% for a, b in [1] %}{% endfor %}", "line 1: 'int' object is not iterable"},
  };
  for (const auto& c : cases) {
    try {
      ChatTemplate::parse(c.source, "bad").render(json::object());
      ADD_FAILURE() << "rendered: " << c.source;
    } catch (const ChatTemplateRaised& e) {
      ADD_FAILURE() << c.source << ": " << e.what();
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("[chat template bad] ") + c.message),
                std::string::npos)
          << e.what();
    }
  }
  try {
    ChatTemplate::parse("\n{{ raise_exception('Roles must alternate') }}", "r")
        .render(json::object());
    ADD_FAILURE() << "raise_exception did not raise";
  } catch (const ChatTemplateRaised& e) {
    EXPECT_EQ(e.message(), "Roles must alternate");
    EXPECT_STREQ(e.what(), "[chat template r] line 2: Roles must alternate");
  }
}

}  // namespace
}  // namespace fitgrad::data
