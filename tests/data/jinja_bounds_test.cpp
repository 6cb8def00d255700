// The bounds of the Jinja engine under hostile templates (issue 58): deep nesting and long
// chains are parse errors naming the line (Note [Jinja nesting bound]), recursion without end,
// loops without end and text without end are render errors naming the template and line
// (Note [Jinja render bounds]), a signal stops a long rendering, and a float power that
// overflows raises as Python does. The jinja2 facts quoted are jinja2 3.1.6 under Python
// 3.11 in transformers' environment (ImmutableSandboxedEnvironment): RecursionError at about
// 100 nested parentheses or {% if %} blocks, 500 links of a `+` chain and 180 nested macro
// calls; `10.0 ** 400` raises OverflowError, `1e308 * 10` renders inf, `10 ** -400` 0.0,
// `x | int` raises OverflowError for x = inf and gives the default for NaN.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <string>
#include <thread>

#include "data/chat_template.h"
#include "data/jinja_expr_parser.h"
#include "data/jinja_render.h"
#include "tensor/interrupt.h"

namespace fitgrad::data {
namespace {

using json = nlohmann::ordered_json;

std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

std::string render(const std::string& source, const json& vars = json::object()) {
  std::tm now{};
  return ChatTemplate::parse(source, "t")
      .render(chat_context(json::array(), false, vars), now)
      .text;
}

// The message of the Error that parsing or rendering `source` throws ("" when none).
std::string error_of(const std::string& source, const json& vars = json::object()) {
  try {
    render(source, vars);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(JinjaBounds, DeepNestingIsAParseErrorNamingTheLine) {
  const int n = 100000;
  for (const std::string& source :
       {"\n{{ " + std::string(n, '(') + "1" + std::string(n, ')') + " }}",
        "\n" + repeat("{% if true %}", 20000) + "x" + repeat("{% endif %}", 20000),
        "\n{{ " + repeat("[", n) + repeat("]", n) + " }}", "\n{{ " + repeat("-", n) + "1 }}",
        "\n{{ " + repeat("not ", n) + "x }}", "\n{{ " + repeat("1 if x else ", n) + "1 }}"}) {
    const std::string e = error_of(source);
    EXPECT_NE(e.find("[chat template t] line 2: the template nests deeper than 256 levels"),
              std::string::npos)
        << e.substr(0, 200);
  }
  // Within the bound, and deeper than jinja2 reads (about 100), it renders.
  EXPECT_EQ(render("{{ " + std::string(200, '(') + "7" + std::string(200, ')') + " }}"), "7");
  EXPECT_EQ(render(repeat("{% if true %}", 200) + "x" + repeat("{% endif %}", 200)), "x");
}

TEST(JinjaBounds, LongChainsAreRefusedPastTheHeightOrRenderFlat) {
  const int n = 100000;
  for (const std::string& source :
       {"{{ 1" + repeat(" + 1", n) + " }}", "{{ x" + repeat(".a", n) + " }}",
        "{{ 'a'" + repeat(" | lower", n) + " }}", "{{ x" + repeat("[0]", n) + " }}",
        "{{ 1" + repeat(" * 1", n) + " }}", "{{ 1" + repeat(" and 1", n) + " }}"}) {
    const std::string e = error_of(source);
    EXPECT_NE(e.find("[chat template t] line 1: an expression deeper than 1000 levels"),
              std::string::npos)
        << e.substr(0, 200);
  }
  // Longer than jinja2 renders (about 500), within the bound.
  EXPECT_EQ(render("{{ 0" + repeat(" + 1", 900) + " }}"), "900");
  // `~` and comparisons are flat: any length renders.
  EXPECT_EQ(render("{{ ''" + repeat(" ~ 'a'", n) + " }}"), std::string(n, 'a'));
  EXPECT_EQ(render("{{ 1" + repeat(" < 2", n) + " }}"), "False");
}

TEST(JinjaBounds, MacroRecursionIsJinja2sRecursionError) {
  for (const char* source : {
           "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}\n{{ f(0) }}",
           "{% macro f(n) %}{{ g(n) }}{% endmacro %}{% macro g(n) %}{{ f(n) }}{% endmacro %}\n"
           "{{ f(0) }}",
           "{% macro f(n) %}{% if n < 10000 %}{{ f(n + 1) }}{% endif %}{% endmacro %}\n"
           "{{ f(0) }}",
       }) {
    const std::string e = error_of(source);
    EXPECT_NE(e.find("[chat template t] line 1: maximum recursion depth exceeded in macro"),
              std::string::npos)
        << e;
  }
  // jinja2 renders 150 nested calls; so does fitgrad.
  EXPECT_EQ(render("{% macro f(n) %}{% if n < 150 %}{{ f(n + 1) }}{% else %}{{ n }}{% endif %}"
                   "{% endmacro %}{{ f(0) }}"),
            "150");
}

TEST(JinjaBounds, LoopsAndTextHaveAWorkAndAnOutputBound) {
  std::string e = error_of(
      "{% for i in range(100000) %}\n{% for j in range(100000) %}{% endfor %}{% endfor %}");
  EXPECT_NE(e.find("[chat template t] line 2: the template takes more than 2000000 steps"),
            std::string::npos)
      << e;
  e = error_of("{% for i in range(100000) %}\n{{ big }}{% endfor %}",
               {{"big", std::string(4096, 'x')}});
  EXPECT_NE(e.find("[chat template t] line 2: the rendered text would make a string of"),
            std::string::npos)
      << e;
  for (const char* source :
       {"\n{{ 'x' * 1000000000000 }}", "\n{{ [1, 2] * 1000000000000 }}",
        "\n{{ 'x'.center(1000000000000) }}", "\n{{ 'x' | center(1000000000000) }}",
        "\n{{ 'ab' | indent(1000000000000) }}",
        "\n{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
        "{% endfor %}",
        "\n{% set ns = namespace(s='x') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}"}) {
    e = error_of(source);
    EXPECT_NE(e.find("line 2: "), std::string::npos) << source << ": " << e;
    EXPECT_NE(e.find("more than the"), std::string::npos) << source << ": " << e;
  }
}

// Values a template builds: a namespace inside itself prints as jinja2 prints it; lists
// nested past 1,000 levels are refused where they are built (jinja2 builds them and fails
// printing), and a chain of 100,000 namespaces fails printing and is freed without
// recursion (Note [Jinja render bounds]).
TEST(JinjaBounds, DeepAndCyclicValuesNeitherCrashNorLeak) {
  EXPECT_EQ(render("{% set ns = namespace() %}{% set ns.x = ns %}{{ ns }}"),
            "<Namespace {'x': <Namespace {...}>}>");
  EXPECT_EQ(render("{% set ns = namespace(a=1) %}{% set ns.x = [ns, {'k': ns}] %}{{ ns }}"),
            "<Namespace {'a': 1, 'x': [<Namespace {...}>, {'k': <Namespace {...}>}]}>");
  EXPECT_EQ(render("{% set ns = namespace(l=[]) %}{% for i in range(900) %}"
                   "{% set ns.l = [ns.l] %}{% endfor %}{{ ns.l | length }}"),
            "1");
  std::string e = error_of(
      "{% set ns = namespace(l=[]) %}{% for i in range(2000) %}\n"
      "{% set ns.l = [ns.l] %}{% endfor %}");
  EXPECT_NE(e.find("line 2: a value nests deeper than 1000 lists and dicts"), std::string::npos)
      << e;
  const std::string chain =
      "{% set head = namespace(p=none) %}{% set st = namespace(tail=head) %}"
      "{% for i in range(100000) %}{% set x = namespace(p=none) %}{% set t = st.tail %}"
      "{% set t.p = x %}{% set st.tail = x %}{% endfor %}";
  EXPECT_EQ(render(chain + "done"), "done");
  e = error_of(chain + "\n{{ head }}");
  EXPECT_NE(e.find("line 2: a value nests deeper than 1000 levels, too deep to print"),
            std::string::npos)
      << e.substr(0, 300);
}

TEST(JinjaBounds, ASignalStopsARendering) {
  const ChatTemplate t = ChatTemplate::parse(
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "t");
  const InterruptScope scope;
  note_interrupt(SIGINT);
  const auto start = std::chrono::steady_clock::now();
  std::tm now{};
  EXPECT_THROW(t.render(chat_context(json::array(), false), now), Interrupted);
  clear_interrupt();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(1));
}

TEST(JinjaBounds, AFloatPowerThatOverflowsRaisesAsPython) {
  for (const char* source : {"{{ 10.0 ** 400 }}", "{{ 10 ** 400.0 }}", "{{ 2.0 ** 1024 }}",
                             "{{ (-10.0) ** 401 }}", "{{ 1.5 ** 2000 }}"})
    EXPECT_NE(error_of(source).find("OverflowError"), std::string::npos) << source;
  EXPECT_EQ(render("{{ 10 ** -400 }} {{ 0.5 ** 2000 }} {{ 2.0 ** 1023 }} {{ 1e308 * 10 }} "
                   "{{ 1e308 + 1e308 }}"),
            "0.0 0.0 8.98846567431158e+307 inf inf");
  // Powers of inf are no overflow (inf ** 2 is inf, 0.5 ** inf is 0.0), as Python's float.
  EXPECT_EQ(render("{% set x = 1e308 * 10 %}{{ x ** 2 }} {{ 0.5 ** x }} {{ (x - x) | int(7) }}"),
            "inf 0.0 7");
  EXPECT_NE(error_of("{% set x = 1e308 * 10 %}{{ x | int }}")
                .find("cannot convert float infinity to integer"),
            std::string::npos);
  // Python's int() of 1e300 is a big integer; fitgrad's are 64-bit, and say so.
  EXPECT_NE(error_of("{{ 1e300 | int }}").find("integer overflow"), std::string::npos);
  EXPECT_NE(error_of("{{ '1e300' | int }}").find("integer overflow"), std::string::npos);
}

}  // namespace
}  // namespace fitgrad::data
