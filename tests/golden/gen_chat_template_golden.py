"""Golden data for fitgrad's chat templates (data/chat_template.h).

Renders every template against Python's jinja2 in the exact environment transformers'
apply_chat_template uses (transformers.utils.chat_template_utils._compile_jinja_template:
ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols, the AssistantTracker
behind {% generation %}, its tojson, raise_exception and strftime_now), through
_render_with_assistant_indices, which also yields the generation spans that
return_assistant_tokens_mask uses.

  - The real templates are tests/golden/chat_templates/*.jinja (sources in README.md there).
    Each renders every conversation below, with add_generation_prompt false and true.
  - The synthetic templates below test one construct each against jinja2: most render the
    PROBE variables, a few (ChatML with generation blocks) every conversation.
A case records the text and the generation spans (code point offsets, as Python counts),
or the error: "TemplateError" with its message for raise_exception, else the exception's
type and message (fitgrad matches the type of failure, not Python's wording).
strftime_now sees a fixed time, NOW, recorded with the cases.

Run with transformers' virtual environment (transformers 4.46.3, jinja2 3.1.6):
    /work/venv-hf/bin/python tests/golden/gen_chat_template_golden.py
It writes tests/golden/chat_templates/expected.json.
"""

import datetime
import json
import os

import jinja2
import transformers
import transformers.utils.chat_template_utils as ctu

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = os.path.join(HERE, "chat_templates")
NOW = datetime.datetime(2024, 9, 5, 14, 30, 7)


class FixedDatetime(datetime.datetime):
    @classmethod
    def now(cls, tz=None):
        return NOW


# transformers' strftime_now calls chat_template_utils.datetime.now().
ctu.datetime = FixedDatetime

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "The city, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                         "description": "Temperature unit"},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {
                "queries": {"type": "array", "items": {"type": "string"},
                            "description": "Queries to run"},
                "max_results": {"type": "integer", "description": "At most this many"},
            },
            "required": ["queries"],
        },
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]

CALL = {"id": "call12345", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}}

CONVERSATIONS = {
    "basic": {"messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Hello, how are you?"},
        {"role": "assistant", "content": "I'm doing great. How can I help you today?"},
        {"role": "user", "content": "Tell me a joke."},
    ]},
    "no_system": {"messages": [
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "2 + 2 = 4."},
        {"role": "user", "content": "And 3 + 3?"},
        {"role": "assistant", "content": "3 + 3 = 6."},
    ]},
    "single_user": {"messages": [{"role": "user", "content": "Hi!"}]},
    "unicode": {"messages": [
        {"role": "system", "content": "Réponds en français. 日本語も OK. Ελληνικά."},
        {"role": "user", "content": "Grüß dich! 你好 😀 — “quotes” and ‘apostrophes’…"},
        {"role": "assistant", "content": "Ça va très bien 👍🏽 ¡Hola! ß İ ı"},
        {"role": "user", "content": "Emoji: 👨‍👩‍👧 🇫🇷 ✓"},
    ]},
    "jinja_text": {"messages": [
        {"role": "user", "content": "Is {{ this }} a tag? {% if x %} no {% endif %} {# c #}"},
        {"role": "assistant", "content": "It's \"text\": 'quotes', a back\\slash,\nnew lines\n\tand tabs. </s> [INST] <|im_end|>"},
        {"role": "user", "content": "  padded  \n\n"},
    ]},
    "whitespace": {"messages": [
        {"role": "system", "content": "\n  sys with spaces  \n"},
        {"role": "user", "content": "\n\nleading newlines"},
        {"role": "assistant", "content": "trailing newlines\n\n"},
        {"role": "user", "content": " "},
    ]},
    "tool_calls": {"messages": [
        {"role": "system", "content": "You can call tools."},
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather",
         "content": "{\"temperature\": 22, \"unit\": \"celsius\"}"},
        {"role": "assistant", "content": "It is 22 °C in Paris."},
        {"role": "user", "content": "Thanks!"},
    ], "tools": TOOLS},
    "tools_single": {"messages": [{"role": "user", "content": "Search for cats."}], "tools": TOOLS},
    "tool_calls_no_tools": {"messages": [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "22"},
        {"role": "tool", "tool_call_id": "call12345", "name": "get_weather", "content": "sunny"},
        {"role": "assistant", "content": "22 degrees and sunny."},
    ]},
    "reasoning": {"messages": [
        {"role": "user", "content": "What is 6 * 7?"},
        {"role": "assistant", "reasoning_content": "6 * 7 = 42.", "content": "42."},
        {"role": "user", "content": "And 6 * 8?"},
        {"role": "assistant", "content": "<think>\n6 * 8 = 48.\n</think>\n\n48."},
        {"role": "user", "content": "Thanks."},
    ]},
    "reasoning_no_thinking": {"messages": [
        {"role": "user", "content": "Hi"},
    ], "extra": {"enable_thinking": False}},
    "alternation_error": {"messages": [
        {"role": "user", "content": "First."},
        {"role": "user", "content": "Second, without a reply between."},
    ]},
    "content_parts": {"messages": [
        {"role": "system", "content": [{"type": "text", "text": "Describe images."}]},
        {"role": "user", "content": [{"type": "text", "text": "What is this?"}, {"type": "image"}]},
    ]},
}

# Each real template's special tokens (transformers passes special_tokens_map).
REAL = {
    "llama31": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "llama32": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    "qwen25": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "qwen3": {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    "mistral_v3": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "mistral_v1": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "mistral_nemo": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "gemma2": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
    "gemma3": {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>"},
    "phi3": {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>"},
    "phi35": {"bos_token": "<s>", "eos_token": "<|endoftext|>", "unk_token": "<unk>"},
    "phi4": {"bos_token": "<|endoftext|>", "eos_token": "<|im_end|>"},
    "smollm2": {"bos_token": "<|im_start|>", "eos_token": "<|im_end|>"},
    "zephyr": {"bos_token": "<s>", "eos_token": "</s>"},
    "llama2": {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    "deepseek_r1": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>"},
    "deepseek_coder": {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<|EOT|>"},
    "hermes3": {"bos_token": "<|begin_of_text|>", "eos_token": "<|im_end|>"},
    "command_r_plus": {"bos_token": "<BOS_TOKEN>", "eos_token": "<|END_OF_TURN_TOKEN|>"},
    "granite33": {"bos_token": "<|end_of_text|>", "eos_token": "<|end_of_text|>"},
    "functionary31": {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
}

PROBE = {
    "s": "  Hello, World!  ",
    "u": "Grüß dich, 世界 😀",
    "n": 7,
    "neg": -7,
    "f": 2.5,
    "big": 1e16,
    "small": 1e-05,
    "lst": [3, 1, 2],
    "words": ["b", "A", "c", "a", "B"],
    "d": {"b": 1, "a": [1, 2.0], "c": {"x": None, "y": True}},
    "people": [{"name": "Ann", "age": 31, "role": "user"},
               {"name": "bob", "age": 25, "role": "assistant"},
               {"name": "Cid", "age": 31}],
    "t": True,
    "nothing": None,
    "empty": "",
    "zero": 0,
    "mixed_quotes": "it's \"quoted\"",
    "only_single": "it's",
    "ctrl": "tab\there\u0001 nbsp\u00a0 zwsp\u200b ls\u2028 del\x7f",
    "multi": "line one\nline two\n\nline four",
}

# Synthetic templates: (source, "probe" | "conversations"). Whitespace in these sources is
# deliberate.
SYNTHETIC = {
    "ws_control": (
        "A\n  {% if true %}\n    B\n  {% endif %}\nC\n{%- if true -%}\n  D  \n{%- endif -%}\n"
        "E {{- ' F ' -}} G\n{%+ if true %}H{% endif +%}\nI\n\t {# comment #}\nJ {# inline #} K\n"
        "{#- dash comment -#}\nL\n{% raw %}{{ raw }} {% if %}{% endraw %}\nM {% if true %}same line{% endif %}\n"
        "  {{ 'var at line start' }}\n  text {% if true %}x{% endif %}\n\t\t{%- if true %}tabs{% endif %}\n"
        "{% for i in [1, 2] %}\n  item {{ i }}\n{% endfor %}\n{%- for i in [1, 2] -%}\n[{{ i }}]\n{%- endfor %}\n"
        "{{-1}}|{{ 2 -}}   |\n{%- raw -%}  raw dash  {%- endraw -%}  |{# a\nmultiline\ncomment #}Z\n"
        "win\r\nlines\rold mac\n  {%+ if true %}plus{% endif %}\n",
        "probe"),
    "ws_start": ("   {% if true %}start{% endif %}\n{{ 'end' }}\n\n", "probe"),
    "ws_comment_start": ("  {# c #}\nafter\n  {#- c2 #}  x\n", "probe"),
    "loops": (
        "{% for x in lst %}{{ loop.index }}/{{ loop.index0 }}/{{ loop.revindex }}/{{ loop.revindex0 }}/"
        "{{ loop.first }}/{{ loop.last }}/{{ loop.length }}/{{ loop.previtem }}/{{ loop.nextitem }}/"
        "{{ loop.cycle('a', 'b') }}/{{ loop.depth }} {% endfor %}\n"
        "{% for x in [] %}never{% else %}empty else{% endfor %}\n"
        "{% for x in lst if x > 1 %}{{ x }}:{{ loop.index }}:{{ loop.length }}:{{ loop.last }} {% endfor %}\n"
        "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}\n"
        "{% for k in d %}{{ k }},{% endfor %} {% for c in 'héllo' %}{{ c }}.{% endfor %}\n"
        "{% for a, (b, c) in [(1, (2, 3)), [4, [5, 6]]] %}{{ a }}{{ b }}{{ c }} {% endfor %}\n"
        "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}\n"
        "{% for x in range(2) %}{% for y in range(2) %}{{ loop.index }}{{ x }}{{ y }} {% endfor %}{{ loop.index }}|{% endfor %}\n"
        "{% for x in [1, 2] %}{% set outer = loop %}{% for y in 'ab' %}{{ outer.index }}{{ y }}{% endfor %}{% endfor %}\n"
        "{% set total = 0 %}{% for x in lst %}{% set total = total + x %}{{ total }}{% endfor %} total={{ total }}\n"
        "{% set ns = namespace(total=0, items=[]) %}{% for x in lst %}{% set ns.total = ns.total + x %}"
        "{% set ns.items = ns.items + [x * 2] %}{% endfor %}ns={{ ns.total }} {{ ns.items }}\n"
        "{% for i in range(3) %}{% if i == 0 %}{% set y = 5 %}{% endif %}[{{ y }}]{% endfor %}\n"
        "{% for x in range(1, 10, 3) %}{{ x }}{% endfor %} {% for x in range(5, 0, -2) %}{{ x }}{% endfor %}\n"
        "{% for m in people %}{{ loop.changed(m.age) }}{% endfor %}\n"
        "{% for x in nothing_here %}x{% else %}undefined iterates as empty{% endfor %}\n",
        "probe"),
    "macros": (
        "{% macro greet(name, greeting='Hello', punct='!') %}{{ greeting }}, {{ name }}{{ punct }}{% endmacro %}"
        "{{ greet('Ann') }} {{ greet('Bob', 'Hi') }} {{ greet('Cid', punct='?') }} {{ greet(name='Dee', greeting='Yo') }}\n"
        "{% macro fact(k) %}{% if k <= 1 %}1{% else %}{{ k * fact(k - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}\n"
        "{% macro va(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ va(1, 2, 3, x=4) }} {{ va() }}\n"
        "{% macro reads() %}{{ later }}{% endmacro %}{% set later = 'seen at call time' %}{{ reads() }}\n"
        "{% set captured = greet('Eve') %}{{ captured|upper }} {{ greet('x')|length }}\n"
        "{% macro defaults_see_args(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ defaults_see_args(3) }}\n"
        "{% macro missing(a, b) %}[{{ a }}][{{ b }}][{{ b is defined }}]{% endmacro %}{{ missing(1) }}\n"
        "{% for i in [1, 2] %}{% macro inloop() %}in loop {{ i }}{% endmacro %}{{ inloop() }} {% endfor %}\n",
        "probe"),
    "blocks": (
        "{% set block %}  inner {{ n }}  {% endset %}[{{ block }}]\n"
        "{% set shout | upper | trim %}  quiet {{ s }} {% endset %}[{{ shout }}]\n"
        "{% filter upper %}filtered {{ u }}{% endfilter %}\n"
        "{% filter replace('a', 'o') | title %}banana bread{% endfilter %}\n"
        "{% with a = 1, b = n %}{{ a + b }}{% endwith %} [{{ a }}]\n"
        "{% set x, y = 1, 2 %}{{ x }}{{ y }} {% set (p, q) = 'ab' %}{{ p }}{{ q }}\n"
        "{% if true %}{% set leaked = 'if has no scope' %}{% endif %}{{ leaked }}\n"
        "{% print n, s|trim %}\n",
        "probe"),
    "slicing": (
        "{{ lst[1:] }} {{ lst[:-1] }} {{ lst[::-1] }} {{ lst[::2] }} {{ lst[-2:] }} {{ lst[5:] }} {{ lst[-10:1] }}\n"
        "{{ u[1:4] }}|{{ u[-1] }}|{{ u[::-1] }}|{{ u[3] }}|{{ u[100] is defined }}|{{ u[-3:] }}\n"
        "{{ lst[0] }} {{ lst[-1] }} {{ lst.1 }} {{ lst[10] is defined }} {{ d['a'][1] }} {{ d.c.y }}\n"
        "{{ (1, 2, 3)[1:] }} {{ 'abcdef'[1:5:2] }} {{ 'abc'[5:1:-1] }} {{ lst[3:0:-1] }}\n",
        "probe"),
    "repr": (
        "{{ [1, 'a', none, true, false, 1.0, {'k': [1, 2]}, (1,), (), [], {}] }}\n"
        "{{ big }} {{ small }} {{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 2 ** 0.5 }} {{ -0.0 }} {{ 1e15 }} {{ 123456789.0 }} {{ 1.5e-7 }} {{ 0.0001 }}\n"
        "{{ [mixed_quotes, only_single, '\"', '\\\\', multi] }}\n"
        "{{ [ctrl] }} {{ [u] }}\n"
        "{{ d }} {{ people[0] }} {{ (1, 'x') }} {{ nothing }} {{ t }} {{ none }} {{ True }} {{ 10 }}\n"
        "{{ ['tab\\there', 'é\\u00e9\\x41\\101\\q'] }} {{ 'adjacent' ' strings' }}\n",
        "probe"),
    "arithmetic": (
        "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7 % 3 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2 ** 10 }} {{ 2 ** -1 }}\n"
        "{{ 1 / 2 }} {{ 4 / 2 }} {{ true + 1 }} {{ 'ab' * 3 }} {{ [1] * 3 }} {{ 3 * 'x' }} {{ 10 - 3.5 }} {{ 2 ** 3 ** 2 }}\n"
        "{{ 'a' ~ 1 ~ none ~ true ~ 1.0 ~ [1] }} {{ n + f }} {{ n * f }} {{ -n }} {{ +f }} {{ neg // 2 }} {{ neg % 2 }}\n"
        "{{ 1 < 2 < 3 }} {{ 1 < 3 > 2 == 2 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }}\n"
        "{{ 2 in lst }} {{ 5 not in lst }} {{ 'ell' in s }} {{ 'a' in d }} {{ 'z' in d }} {{ none is none }} {{ n is not none }}\n"
        "{{ 'yes' if t }}|{{ 'yes' if nothing }}|{{ 'a' if zero else 'b' }}|{{ n and 'x' }}|{{ zero or 'y' }}|{{ empty or nothing }}\n"
        "{{ not t }} {{ not zero }} {{ (1 + 2) * 3 }} {{ 1 + 2 * 3 }} {{ -2 ** 2 }} {{ lst|length + 1 }} {{ -n|abs }} {{ -(lst|length) }}\n"
        "{{ [1, 2] + [3] }} {{ (1,) + (2,) }} {{ 'x' + 'y' }} {{ {'a': 1} == {'a': 1} }} {{ [1] == (1,) }}\n",
        "probe"),
    "undefined": (
        "[{{ missing }}] {{ missing is defined }} {{ missing is undefined }} {{ missing|length }} {{ missing|default('d') }}\n"
        "{{ missing == missing }} {{ missing != 1 }} {{ missing ~ 'x' }} [{{ missing|string }}] [{{ missing|trim }}] {{ missing|list }}\n"
        "{{ d.nokey is defined }} {{ d['nokey'] is defined }} {{ lst[10] is defined }} {{ nothing.attr is defined }}\n"
        "{{ missing is iterable }} {{ missing is sequence }} {{ missing is none }} {{ missing is string }} {{ not missing }}\n"
        "{{ [missing] }} {{ missing in lst }} {{ 1 in missing }} {{ missing|first is defined }} {{ missing|items|list }}\n"
        "{{ empty|default('e') }} {{ empty|default('e', true) }} {{ zero|d(5, boolean=true) }} {{ nothing|default('n') }}\n"
        "{{ d.items is defined }} {{ s.upper is defined }} {{ (1 if false) is defined }} {{ missing|join(',') }}\n",
        "probe"),
    "undefined_error": ("{{ missing + 1 }}", "probe"),
    "undefined_attr_error": ("{{ d.nokey.deeper }}", "probe"),
    "type_error": ("{{ 'a' + 1 }}", "probe"),
    "raise": ("before {{ raise_exception('Custom failure: ' ~ n) }} after", "probe"),
    "tests": (
        "{{ n is number }} {{ f is number }} {{ t is number }} {{ n is integer }} {{ t is integer }} {{ f is float }}\n"
        "{{ s is string }} {{ d is mapping }} {{ lst is mapping }} {{ lst is iterable }} {{ s is iterable }} {{ n is iterable }}\n"
        "{{ lst is sequence }} {{ d is sequence }} {{ t is boolean }} {{ n is boolean }} {{ t is true }} {{ zero is false }}\n"
        "{{ n is odd }} {{ n is even }} {{ 9 is divisibleby 3 }} {{ n is divisibleby(3) }} {{ n is eq 7 }} {{ n is equalto 7 }}\n"
        "{{ n is ne 7 }} {{ n is gt 3 }} {{ n is lt(3) }} {{ n is ge 7 }} {{ n is le 6 }} {{ 2 is in lst }} {{ 'x' is in 'xyz' }}\n"
        "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aBc' is lower }} {{ range is callable }} {{ s is callable }}\n"
        "{{ nothing is sameas none }} {{ 'upper' is filter }} {{ 'odd' is test }} {{ nothing is none }} {{ n is not string }}\n",
        "probe"),
    "filters": (
        "[{{ s|trim }}] [{{ '..x..'|trim('.') }}] {{ s|length }} {{ u|length }} {{ lst|count }} {{ d|length }}\n"
        "{{ u|upper }} {{ u|lower }} {{ 'hello wORLD-foo(bar) [baz] it\\'s'|title }} {{ 'hello WORLD'|capitalize }}\n"
        "{{ s|replace('l', 'L') }} {{ s|replace('l', 'L', 2) }} {{ words|join }} {{ words|join(', ') }} {{ people|join('; ', attribute='name') }}\n"
        "{{ lst|first }} {{ lst|last }} {{ 'xyz'|first }} {{ d|first }} {{ s|list|length }} {{ d|list }} {{ 'ab'|list }}\n"
        "{{ n|string ~ '!' }} {{ '42'|int + 1 }} {{ '3.9'|int }} {{ 'x'|int }} {{ 'x'|int(-1) }} {{ 3.99|int }} {{ '0x1A'|int(0, 16) }} {{ ' 12 '|int }}\n"
        "{{ '2.5'|float * 2 }} {{ 'nan?'|float }} {{ n|float }} {{ neg|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 7|round }}\n"
        "{{ 2.1|round(0, 'ceil') }} {{ 2.9|round(0, 'floor') }} {{ d|items|list }} {{ d|dictsort }} {{ {'b': 1, 'A': 2, 'c': 0}|dictsort(by='value') }}\n"
        "{{ words|unique|list }} {{ words|unique(case_sensitive=true)|list }} {{ words|sort }} {{ words|sort(reverse=true, case_sensitive=true) }}\n"
        "{{ people|selectattr('age', 'equalto', 31)|map(attribute='name')|list }} {{ people|rejectattr('role')|list }}\n"
        "{{ lst|select('odd')|list }} {{ lst|reject('odd')|list }} {{ lst|select|list }} {{ words|map('upper')|join }} {{ people|map(attribute='role', default='?')|list }}\n"
        "{{ people|selectattr('role', 'defined')|map(attribute='name')|join(',') }} {{ people|sort(attribute='age')|map(attribute='name')|join }}\n"
        "{{ lst|sum }} {{ people|sum(attribute='age') }} {{ lst|max }} {{ lst|min }} {{ words|max }} {{ people|max(attribute='age') }}\n"
        "{{ lst|reverse|list }} {{ 'abc'|reverse }} {{ '<a href=\"x\">&\\'</a>'|e }} {{ '<b>'|escape }} {{ '<b>'|safe }}\n"
        "[{{ multi|indent }}] [{{ multi|indent(2, true) }}] [{{ multi|indent('> ', blank=true) }}]\n"
        "[{{ 'ab'|center(7) }}] {{ 'one two, three'|wordcount }} {{ d|attr('items') is defined }} {{ lst|map('string')|join('-') }}\n"
        "{{ lst|select('odd') is iterable }} {{ (lst|select('odd'))|first }} {{ d|attr('b') is defined }}\n"
        "{{ nothing|selectattr('x')|list }} {{ nothing|map('upper')|list }} {{ zero|reject|list }} {{ '<'|safe + '<' }} {{ '<' + '>'|safe }}\n"
        "{{ '<'|e|e }} {{ '<'|forceescape|forceescape }} {{ '<'|safe * 2 + '&' }} {{ ('<'|safe ~ '<') }} {{ ['<'|safe, '\\''|e] }}\n",
        "probe"),
    "tojson": (
        "{{ d|tojson }}\n{{ d|tojson(indent=2) }}\n{{ people|tojson(indent='\\t') }}\n{{ d|tojson(separators=(',', ':')) }}\n"
        "{{ {'z': 1, 'a': [], 'm': {}}|tojson(sort_keys=true, indent=1) }}\n{{ u|tojson }} {{ u|tojson(true) }} {{ ctrl|tojson }}\n"
        "{{ [1.0, 1e16, 0.5, -0.0, true, none, 'q\"\\\\/'] |tojson }} {{ (1, 2)|tojson }} {{ {1: 'int key', true: 'b', none: 'n'}|tojson }}\n"
        "{{ [[], {}, [[]]]|tojson(indent=0) }}\n",
        "probe"),
    "str_methods": (
        "[{{ s.strip() }}] [{{ s.lstrip() }}] [{{ s.rstrip() }}] [{{ 'xxhixx'.strip('x') }}] [{{ '\\n\\nab\\n'.lstrip('\\n') }}]\n"
        "{{ 'a,b,,c'.split(',') }} {{ ' a  b c '.split() }} {{ 'a b c'.split(' ', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ '  x  y '.rsplit(none, 1) }}\n"
        "{{ s.startswith('  He') }} {{ s.endswith(('!', '!  ')) }} {{ 'abc'.upper() }} {{ 'ABC'.lower() }} {{ \"they're bill's\".title() }}\n"
        "{{ 'hello world'.capitalize() }} {{ s.replace('l', '_', 1) }} {{ u.find('世') }} {{ s.find('zz') }} {{ 'banana'.count('an') }}\n"
        "{{ '-'.join(['a', 'b']) }} {{ 'x{}y{}'.format(1, 'z') }} {{ '{0}{name}{{}}'.format('p', name='q') }} {{ multi.splitlines() }}\n"
        "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ ''.isdigit() }} {{ '  '.isspace() }} {{ 'Ab'.isupper() }} {{ 'prefix_x'.removeprefix('prefix_') }}\n"
        "{{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'ab'.ljust(4, '*') }}|{{ 'ab'.rjust(4) }}|{{ 'AbC'.swapcase() }}\n"
        "{{ d.get('b') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }}\n"
        "{{ lst.index(1) }} {{ lst.count(3) }} {{ s.upper is callable }}\n",
        "probe"),
    "literals": (
        "{{ \"double\" }} {{ 'single' }} {{ 'esc\\'aped' }} {{ \"new\\nline\" }} {{ 1_000 }} {{ 0x10 }} {{ 0o17 }} {{ 0b101 }} {{ 1e3 }} {{ 2.5e-3 }}\n"
        "{{ True }} {{ False }} {{ None }} {{ true }} {{ [1, 2,] }} {{ {'k': 'v', 'n': 1,} }} {{ (1, 2,) }} {{ (1) }} {{ () }}\n"
        "{{ {'a': 1}['a'] }} {{ {'a': {'b': 2}}.a.b }} {{ [[1, 2], [3]][0][1] }} {{ dict(a=1, b=[2]) }} {{ namespace(x=1).x }} {{ namespace(x=1) }}\n"
        "{{ range(3)|list }} {{ 'x' if true else 'y' if false else 'z' }} {{ n, s|trim }}\n",
        "probe"),
    "misc": (
        "{{ 1.5|round }} {{ 0.5|round }} {{ -0.5|round }} {{ 1.25|round(1) }} {{ 1.35|round(1) }} {{ 15|round(-1) }} {{ 1234.5|round(-2) }}\n"
        "{{ '1_000'|float }} {{ ' 1_000 '|int }} {{ '0b11'|int(0, 0) }} {{ '12'|int(base=8) }} {{ '0x_ff'|int(0, 16) }} {{ '1__0'|int(-1) }} {{ none|int }}\n"
        "{{ 1e300 * 1e10 }} {{ 123456789012345678 }} {{ 5e-324 }} {{ 1.7976931348623157e308 }} {{ 0.1 * 3 }} {{ 1e22 }} {{ 9007199254740993 }}\n"
        "{{ -7 // -2 }} {{ 7 // -2 }} {{ -7 % -2 }} {{ 5.0 % -3 }} {{ -0.0 % 5 }} {{ 'a' * 0 }}|{{ 'a' * -1 }}|{{ 2 ** 62 }}\n"
        "{{ 'abc'|replace('', '-') }} {{ 'é'|length }} {{ '😀'|length }} {{ '👨‍👩‍👧'|length }} {{ 'héllo'[::2] }} {{ 'x'|center(6) }}|{{ 'xy'|center(5) }}|\n"
        "{{ [1, 2, 3]|select('gt', 1)|list }} {{ [1, 2, 3]|reject('equalto', 2)|list }} {{ ['a', 'B']|select('upper')|list }} {{ [none, 1]|select('none')|list }}\n"
        "{{ [{'a': {'b': 1}}, {'a': {}}]|selectattr('a.b')|list }} {{ [[1, 2], [3, 4]]|map(attribute=0)|list }} {{ [[1, 2]]|map(attribute='1')|list }}\n"
        "{{ 'a_b c-d e.f'|title }} {{ 'ÉCOLE école'|lower }} {{ 'straße'|upper }} {{ ['a', 'b']|join(1) }} {{ ('a', 1) in [('a', 1)] }} {{ 1 in [1.0] }}\n"
        "{% set a = 'x' %}{% macro f() %}{{ a }}{% set a = 'y' %}{{ a }}{% endmacro %}{{ f() }}{{ a }} {{ 1 if true }}{{ 2 if false }}|{{ (3 if false) ~ 'x' }}\n"
        "{{ '  x  '|indent(2) }}|{{ 'a\nb'|indent(first=true) }}|{{ ''|indent }}|{{ 'a\n\nb\n'|indent(blank=true) }}|{{ '\u00a0x\u00a0'|trim }}\n"
        "x  \n{%- if true %}a{%- endif %}\n\n  {#- c -#}  \n\ny\n  \t{% if true %}T{% endif %}\t\n{% raw -%}   r   {%- endraw %}\n",
        "probe"),
    "strftime": ("{{ strftime_now('%Y-%m-%d %H:%M:%S %A %B %d %b %j %%') }} {{ strftime_now('%d %b %Y') }}", "probe"),
    "generation_probe": (
        "{% generation %}first block ignored{% endgeneration %} then {% generation %}recorded é{% endgeneration %}"
        "{% macro m() %}{% generation %}in macro{% endgeneration %}{% endmacro %} [{{ m() }}]"
        "{% for i in range(2) %} <{% generation %}loop {{ i }}{% endgeneration %}>{% endfor %}",
        "probe"),
    "chatml_generation": (
        "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
        "{% if message['role'] == 'assistant' %}{% generation %}{{ message['content'] + '<|im_end|>' }}{% endgeneration %}"
        "{% else %}{{ message['content'] + '<|im_end|>' }}{% endif %}{{ '\\n' }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
        "conversations"),
    "generation_whitespace": (
        "{%- for message in messages %}\n"
        "    {%- if message.role == 'assistant' %}\n"
        "        {{- '<|assistant|>\\n' }}\n"
        "        {%- generation %}\n"
        "            {{- message.content | trim }}\n"
        "            {{- eos_token }}\n"
        "        {%- endgeneration %}\n"
        "    {%- else %}\n"
        "        {{- '<|' + message.role + '|>\\n' + message.content | trim + '\\n' }}\n"
        "    {%- endif %}\n"
        "{%- endfor %}\n"
        "{%- if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% endif %}\n",
        "conversations"),
}
SYNTHETIC_EXTRA = {"eos_token": "</s>"}


def context(messages, add_generation_prompt, extra):
    """The keyword arguments apply_chat_template passes (data/chat_template.h's chat_context)."""
    kwargs = {"messages": messages, "tools": extra.get("tools"), "documents": extra.get("documents"),
              "add_generation_prompt": add_generation_prompt}
    for key, value in extra.items():
        if key not in ("tools", "documents"):
            kwargs[key] = value
    return kwargs


def render(source, kwargs):
    try:
        compiled = ctu._compile_jinja_template(source)
        text, spans = ctu._render_with_assistant_indices(compiled_template=compiled, **kwargs)
    except jinja2.exceptions.TemplateError as e:
        kind = "TemplateError" if type(e) is jinja2.exceptions.TemplateError else type(e).__name__
        return {"error": kind, "message": str(e)}
    except Exception as e:  # noqa: BLE001 - every failure is a recorded outcome
        return {"error": type(e).__name__, "message": str(e)}
    case = {"text": text}
    if spans:
        case["spans"] = [list(s) for s in spans]
    return case


def main():
    cases = []
    templates = {}
    for name, special in REAL.items():
        templates[name] = {"file": name + ".jinja", "extra": special, "run": "conversations"}
    for name, (source, run) in SYNTHETIC.items():
        templates[name] = {"source": source, "extra": SYNTHETIC_EXTRA, "run": run}
    for name, spec in templates.items():
        if "file" in spec:
            with open(os.path.join(DIR, spec["file"]), encoding="utf-8", newline="") as f:
                source = f.read()
        else:
            source = spec["source"]
        for agp in (False, True):
            if spec["run"] == "probe":
                extra = dict(PROBE, **spec["extra"])
                case = render(source, context(CONVERSATIONS["basic"]["messages"], agp, extra))
                cases.append(dict(template=name, conversation="basic", probe=True,
                                  add_generation_prompt=agp, **case))
                continue
            for conv_name, conv in CONVERSATIONS.items():
                extra = dict(spec["extra"])
                if "tools" in conv:
                    extra["tools"] = conv["tools"]
                extra.update(conv.get("extra", {}))
                case = render(source, context(conv["messages"], agp, extra))
                cases.append(dict(template=name, conversation=conv_name, add_generation_prompt=agp, **case))
    tt = NOW.timetuple()
    out = {
        "generated_by": "tests/golden/gen_chat_template_golden.py",
        "jinja2": jinja2.__version__,
        "transformers": transformers.__version__,
        "now": {"year": tt.tm_year, "month": tt.tm_mon, "day": tt.tm_mday, "hour": tt.tm_hour,
                "minute": tt.tm_min, "second": tt.tm_sec, "wday": (tt.tm_wday + 1) % 7,
                "yday": tt.tm_yday - 1},
        "conversations": CONVERSATIONS,
        "probe": PROBE,
        "templates": templates,
        "cases": cases,
    }
    path = os.path.join(DIR, "expected.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")
    errors = sum(1 for c in cases if "error" in c)
    print(f"{path}: {len(cases)} cases ({errors} errors), {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
