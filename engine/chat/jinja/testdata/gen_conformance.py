#!/usr/bin/env python3
"""Regenerate conformance.json: small templates rendered by jinja2 configured
exactly like transformers' chat-template environment (ImmutableSandboxedEnvironment,
trim_blocks, lstrip_blocks, loopcontrols, tojson without HTML escaping,
raise_exception, strftime_now). The Go tests render the same templates and
compare byte for byte.

Usage: python3 gen_conformance.py [OUT]   (default: conformance.json beside this file)
Needs only jinja2 (3.1.x).
"""
import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        # Fixed clock so outputs are reproducible; the Go test uses the same.
        return datetime(2024, 3, 5, 7, 8, 9).strftime(fmt)

    class Generation(jinja2.ext.Extension):
        # transformers' AssistantTracker: {% generation %} renders its body.
        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

        def _render(self, caller):
            return caller()

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


MSGS = [
    {"role": "system", "content": "sys"},
    {"role": "user", "content": "hi"},
    {"role": "assistant", "content": "hello"},
]

# (name, template, vars)
CASES = [
    # --- whitespace control, trim_blocks / lstrip_blocks
    ("text", "hello", {}),
    ("trailing_newline_dropped", "a\n", {}),
    ("two_trailing_newlines", "a\n\n", {}),
    ("crlf", "a\r\nb\rc", {}),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("lstrip_blocks", "  {% if true %}\n  x\n  {% endif %}\ny", {}),
    ("lstrip_not_var", "  {{ 1 }}\n", {}),
    ("lstrip_plus", "  {%+ if true %}x{% endif %}", {}),
    ("trim_plus", "{% if true +%}\nx{% endif %}", {}),
    ("dash_left", "a  \n  {%- if true %}x{% endif %}", {}),
    ("dash_right", "{% if true -%}  \n\n  x{% endif %}", {}),
    ("var_dash", "a \n {{- 1 -}} \n b", {}),
    ("var_no_trim", "{{ 1 }}\n{{ 2 }}\n", {}),
    ("comment", "a{# c #}b\n{# line #}\nc", {}),
    ("comment_dash", "a  {#- c -#}  b", {}),
    ("comment_lstrip", "x\n    {# c #}\ny", {}),
    ("raw", "{% raw %}{{ x }}{% endraw %}", {}),
    ("raw_ws", "  {% raw -%}  {{ a }} \n  {%- endraw %}\nz", {}),
    ("tab_lstrip", "\t{% if true %}t{% endif %}", {}),
    ("text_before_tag_same_line", "ab {% if true %}x{% endif %}", {}),
    ("nbsp_lstrip", "\u00a0{% if true %}x{% endif %}", {}),
    ("newline_after_var", "{{ 'a' }}\n{% if true %}b{% endif %}", {}),
    ("block_after_block", "{% set x = 1 %}\n{% set y = 2 %}\n{{ x + y }}", {}),
    ("unicode_ws_rstrip", "a\u3000{%- if true %}b{% endif %}", {}),
    # --- literals
    ("str_escapes", r"""{{ 'a\nb\t\\\'"\x41\u00e9\U0001F600\101' }}""", {}),
    ("str_unknown_escape", r"{{ 'a\db' }}", {}),
    ("str_concat_lit", "{{ 'a' 'b' \"c\" }}", {}),
    ("ints", "{{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 00 }}", {}),
    ("floats", "{{ 1.5 }} {{ 1e3 }} {{ 2.0 }} {{ 1_0.5 }} {{ 1E-2 }}", {}),
    ("consts", "{{ true }} {{ False }} {{ none }} {{ None }}", {}),
    ("list_lit", "{{ [1, 'a', [2.5, none], {'k': true}] }}", {}),
    ("tuple_lit", "{{ (1, 2) }} {{ (1,) }} {{ () }}", {}),
    ("dict_lit", "{{ {'a': 1, 'b': [True, None], 2: 'x'} }}", {}),
    ("nested_braces", "{{ {'a': {'b': 1}} }}", {}),
    ("str_repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"'] }}", {}),
    ("bigint", "{{ 123456789012345678901234567890 + 1 }}", {}),
    # --- printing values
    ("print_none_undef", "[{{ none }}][{{ nope }}]", {}),
    ("print_floats", "{{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }} {{ 3/2 }} {{ 4/2 }} {{ 0.1+0.2 }}", {}),
    ("print_json_values", "{{ v }}", {"v": {"i": 2, "f": 2.0, "g": 2.5, "n": None, "b": False, "s": "x", "l": [1, "é"]}}),
    ("print_big_float", "{{ 1.7976931348623157e308 * 10 }} {{ -(1e308*10) }}", {}),
    ("print_unicode_repr", "{{ ['é', '\\x00', '\\u200b', 'a\\nb'] }}", {}),
    ("print_namespace", "{% set ns = namespace(a=1) %}{{ ns }}", {}),
    # --- operators
    ("arith", "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7 / 2 }}", {}),
    ("float_arith", "{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 2.0 ** 3 }} {{ 1 + 2.0 }}", {}),
    ("bool_arith", "{{ true + 1 }} {{ true * 3 }} {{ -true }}", {}),
    ("str_ops", "{{ 'ab' * 3 }} {{ 3 * 'x' }} {{ 'a' + 'b' }} {{ 'a' ~ 1 ~ none ~ nope }}", {}),
    ("list_ops", "{{ [1] + [2] }} {{ [0] * 3 }} {{ (1,) + (2,) }}", {}),
    ("compare", "{{ 1 < 2 < 3 }} {{ 1 < 2 > 3 }} {{ 'a' < 'b' }} {{ [1,2] < [1,3] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }}", {}),
    ("compare_mixed_eq", "{{ 1 == '1' }} {{ none == none }} {{ [1] == [1.0] }} {{ {'a':1} == {'a':1} }}", {}),
    ("in_ops", "{{ 'a' in 'cat' }} {{ 2 in [1,2] }} {{ 'k' in {'k':1} }} {{ 3 not in [1] }} {{ 'x' in nope }}", {}),
    ("logic", "{{ 1 and 2 }} {{ 0 and 2 }} {{ 0 or 'x' }} {{ not 0 }} {{ not not 'a' }} {{ none or [] }}", {}),
    ("condexpr", "{{ 'y' if 1 else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if 0 }}] {{ 1 if 0 else 2 if 1 else 3 }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 ** 3 ** 2 }} {{ 'a' ~ 1 + 2 }}", {}),
    ("concat_binds_tighter", "{{ 1 + 2 ~ 3 }}", {}),
    ("filter_precedence", "{{ -1|abs }} {{ 'a' + 'b'|upper }} {{ 'x' ~ [1,2]|length }}", {}),
    ("not_is", "{{ not x is defined }} {{ x is not defined }} {{ not (x is defined) }}", {}),
    ("is_chain_and", "{{ 1 is number and 'a' is string }} {{ x is defined or 1 }}", {}),
    # --- attribute & item access
    ("getattr_dict", "{{ m.role }} {{ m['content'] }} [{{ m.missing }}] [{{ m['missing'] }}]", {"m": {"role": "user", "content": "hi"}}),
    ("dict_method_priority", "{{ d.items is defined }} {{ d['items'] }} {{ d.keys() | list }}", {"d": {"items": 5, "x": 1}}),
    ("getitem_list", "{{ l[0] }} {{ l[-1] }} [{{ l[5] }}] {{ l.0 }}", {"l": [1, 2, 3]}),
    ("slices", "{{ l[1:] }} {{ l[:-1] }} {{ l[::-1] }} {{ l[::2] }} {{ l[-2:] }} {{ l[5:] }} {{ l[3:1:-1] }}", {"l": [1, 2, 3, 4, 5]}),
    ("str_slices", "{{ s[1:] }} {{ s[::-1] }} {{ s[-2] }} {{ s[1:3] }}", {"s": "héllo"}),
    ("tuple_slice", "{{ (1,2,3)[1:] }}", {}),
    ("attr_of_undefined_errors", "{{ nope.x }}", {}),
    ("attr_chain_missing", "{{ m.a.b }}", {"m": {}}),
    ("item_of_none", "[{{ n.x }}][{{ n['x'] }}]", {"n": None}),
    ("str_attr_missing", "[{{ s.foo }}]", {"s": "abc"}),
    ("list_elem_missing_attr", "{{ l[3].role }}", {"l": [1]}),
    ("messages_loop", "{% for m in messages %}<{{ m.role }}:{{ m.content }}>{% endfor %}", {"messages": MSGS}),
    # --- control structures
    ("if_elif_else", "{% for x in [1,2,3] %}{% if x == 1 %}a{% elif x == 2 %}b{% else %}c{% endif %}{% endfor %}", {}),
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }};{% endfor %}", {}),
    ("for_prev_next", "{% for x in [1,2,3] %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", {}),
    ("for_prev_next_defined", "{% for x in [1,2] %}{{ loop.previtem is defined }}{{ loop.nextitem is defined }};{% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}{% for x in [1] %}x{% else %}e{% endfor %}", {}),
    ("for_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.index }}{{ loop.length }}{{ loop.last }},{% endfor %}", {}),
    ("for_dict", "{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}|{% for k, v in d|items %}{{ k }}{{ v }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("for_unpack_list", "{% for a, b in [[1, 2], (3, 4)] %}{{ a }}{{ b }}{% endfor %}", {}),
    ("for_unpack_paren", "{% for (a, b) in [[1, 2]] %}{{ a }}-{{ b }}{% endfor %}", {}),
    ("for_unpack_error", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    ("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("for_nested_loop", "{% for a in [1,2] %}{% for b in [3,4] %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }};{% endfor %}", {}),
    ("for_undefined", "{% for x in nope %}x{% else %}none{% endfor %}", {}),
    ("for_none_error", "{% for x in n %}x{% endfor %}", {"n": None}),
    ("for_int_error", "{% for x in 5 %}x{% endfor %}", {}),
    ("for_string_chars", "{% for c in 'hé!' %}[{{ c }}]{% endfor %}", {}),
    ("for_reverse_slice", "{% for m in messages[::-1] %}{{ m.role }}{{ loop.index0 }} {% endfor %}", {"messages": MSGS}),
    ("loop_cycle_changed", "{% for x in [1,1,2] %}{{ loop.cycle('a','b') }}{{ loop.changed(x) }} {% endfor %}", {}),
    ("for_loop_filter_ns", "{% set ns = namespace(n=0) %}{% for x in [1,2,3,4] if x > ns.n %}{% set ns.n = x + 1 %}{{ x }}{% endfor %}", {}),
    ("for_loop_filter_last_peek", "{% set ns = namespace(n=0) %}{% for x in [1,2,3,4] if x > ns.n %}{{ loop.last }}{% set ns.n = x + 1 %}{{ x }}{% endfor %}", {}),
    # --- scoping
    ("scope_for_set", "{% set x = 1 %}{% for i in [1,2] %}{{ x }}{% set x = i*10 %}{{ x }};{% endfor %}{{ x }}", {}),
    ("scope_for_fresh_iteration", "{% for i in [1,2] %}{% if i == 2 %}[{{ y }}]{% endif %}{% set y = i %}{% endfor %}[{{ y }}]", {}),
    ("scope_if_leaks", "{% if true %}{% set q = 3 %}{% endif %}{{ q }}", {}),
    ("scope_loop_var_gone", "{% for i in [1,2] %}{% endfor %}[{{ i }}]", {}),
    ("scope_nested_loop", "{% for i in [1,2] %}{% for j in [3] %}{% set x = j %}{% endfor %}[{{ x }}]{% endfor %}", {}),
    ("scope_macro_late_binding", "{% macro m() %}{{ z }}{% endmacro %}{% set z = 5 %}{{ m() }}", {}),
    ("scope_macro_lexical", "{% macro m() %}[{{ z }}]{% endmacro %}{% for z in [7] %}{{ m() }}{% endfor %}", {}),
    ("scope_macro_local_set", "{% macro m() %}{% set z = 9 %}{{ z }}{% endmacro %}{% set z = 1 %}{{ m() }}{{ z }}", {}),
    ("scope_with", "{% set a = 1 %}{% with a = 2, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}", {}),
    ("scope_filter_block", "{% filter upper %}{% set q = 'in' %}{{ q }}{% endfilter %}[{{ q }}]", {}),
    ("scope_set_block", "{% set x %}{% set inner = 1 %}body{% endset %}{{ x }}[{{ inner }}]", {}),
    ("shadow_var", "{% set messages = [1] %}{{ messages }}", {"messages": MSGS}),
    ("shadow_global", "{{ range }}", {"range": "mine"}),
    # --- set / namespace
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}{% set c = 1, 2 %}{{ c }}", {}),
    ("set_block_filter", "{% set x | upper %}abc{% endset %}{{ x }}", {}),
    ("namespace_basic", "{% set ns = namespace(found=false, n=0) %}{% for x in [1,2,3] %}{% set ns.n = ns.n + x %}{% if x == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.found }} {{ ns.n }} [{{ ns.missing }}]", {}),
    ("namespace_from_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}{{ ns['a'] }}", {}),
    ("ns_assign_non_ns", "{% set x = 1 %}{% set x.a = 2 %}", {}),
    ("dict_global", "{{ dict(a=1, b=[2]) }} {{ dict([('x', 1)]) }}", {}),
    ("range_global", "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }}", {}),
    ("range_too_big", "{{ range(200000)|length }}", {}),
    # --- macros
    ("macro_defaults", "{% macro f(a, b='B', c=none) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(1) }}|{{ f(1, 2) }}|{{ f(1, c=3) }}|{{ f(b=2, a=1) }}", {}),
    ("macro_missing_arg", "{% macro f(a, b) %}[{{ a }}][{{ b }}]{% endmacro %}{{ f(1) }}", {}),
    ("macro_varargs_kwargs", "{% macro f(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, 3, x=4) }}", {}),
    ("macro_too_many", "{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, 2) }}", {}),
    ("macro_bad_kw", "{% macro f(a) %}{{ a }}{% endmacro %}{{ f(1, z=2) }}", {}),
    ("macro_returns_str", "{% macro f() %}  x  {% endmacro %}[{{ f()|trim }}]{{ f() is string }}", {}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("macro_call_block", "{% macro wrap(x) %}<{{ caller(x) }}>{% endmacro %}{% call(v) wrap(3) %}v={{ v }}{% endcall %}", {}),
    ("macro_namespace_mutation", "{% set c = namespace(v=0) %}{% macro inc() %}{% set c.v = c.v + 1 %}{% endmacro %}{{ inc() }}{{ inc() }}{{ c.v }}", {}),
    ("macro_print", "{% macro m() %}x{% endmacro %}{{ m }}", {}),
    ("macro_ws", "{% macro m(x) %}\n  {{ x }}\n{% endmacro %}\n[{{ m(1) }}]", {}),
    # --- tests
    ("tests_types", "{% for v in [1, 1.5, 'a', [1], {'a':1}, none, true] %}{{ v is integer }}{{ v is float }}{{ v is number }}{{ v is string }}{{ v is sequence }}{{ v is mapping }}{{ v is iterable }}{{ v is none }}{{ v is boolean }};{% endfor %}", {}),
    ("tests_undefined", "{{ x is defined }}{{ x is undefined }}{{ x is sequence }}{{ x is iterable }}{{ x is none }}{{ x is string }}{{ x is mapping }}", {}),
    ("tests_truefalse", "{{ true is true }}{{ 1 is true }}{{ false is false }}{{ 0 is false }}{{ none is none }}", {}),
    ("tests_numbers", "{{ 3 is odd }}{{ 4 is even }}{{ 9 is divisibleby 3 }}{{ 9 is divisibleby(4) }}", {}),
    ("tests_compare", "{{ 1 is eq 1 }}{{ 1 is equalto(2) }}{{ 2 is gt 1 }}{{ 2 is lt 1 }}{{ 2 is ge 2 }}{{ 2 is le 1 }}{{ 1 is ne 2 }}", {}),
    ("tests_misc", "{{ 'a' is in 'abc' }}{{ 'ABC' is upper }}{{ 'abc' is lower }}{{ none is sameas none }}{{ range is callable }}{{ 'upper' is filter }}{{ 'odd' is test }}{{ 'x'|safe is escaped }}", {}),
    ("test_with_attr_arg", "{{ 2 is in d.l }}", {"d": {"l": [1, 2]}}),
    ("unknown_test", "{{ 1 is frobnicated }}", {}),
    # --- filters
    ("f_trim", "[{{ '  a b \n'|trim }}][{{ 'xxaxx'|trim('x') }}][{{ nope|trim }}][{{ none|trim }}]", {}),
    ("f_length", "{{ 'héllo'|length }} {{ [1,2]|length }} {{ {'a':1}|count }} {{ nope|length }}", {}),
    ("f_length_none_error", "{{ n|length }}", {"n": None}),
    ("f_string", "{{ 1|string }} {{ [1, 'a']|string }} {{ none|string }} [{{ nope|string }}] {{ 2.0|string }}", {}),
    ("f_case", "{{ 'hello WORLD'|upper }} {{ 'Hello'|lower }} {{ 'hello world-foo(bar'|title }} {{ 'hELLO wORLD'|capitalize }}", {}),
    ("f_case_unicode", "{{ 'straße'|upper }} {{ 'ÉCOLE'|lower }} {{ 'éa'|capitalize }}", {}),
    ("f_replace", "{{ 'aaa'|replace('a', 'b') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ 'abc'|replace('', '-') }}", {}),
    ("f_join", "{{ [1, 'a', none]|join(', ') }} {{ ['x','y']|join }} {{ [{'n': 'a'}, {'n': 'b'}]|join('-', attribute='n') }}", {}),
    ("f_first_last", "{{ [1,2,3]|first }} {{ [1,2,3]|last }} {{ 'abc'|first }} [{{ []|first }}] {{ {'k': 1}|first }}", {}),
    ("f_default", "{{ nope|default('d') }} {{ none|default('d') }} {{ ''|default('d', true) }} {{ 0|d(5, boolean=true) }} {{ 'v'|d('x') }}", {}),
    ("f_list", "{{ 'ab'|list }} {{ {'a': 1}|list }} {{ nope|list }} {{ (1,2)|list }}", {}),
    ("f_items", "{{ {'a': 1, 'b': 2}|items|list }} {{ nope|items|list }}", {}),
    ("f_items_error", "{{ [1]|items|list }}", {}),
    ("f_selectattr", "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|rejectattr('role', 'eq', 'user')|map(attribute='role')|join(',') }}", {"messages": MSGS}),
    ("f_select", "{{ [1,2,3,4]|select('odd')|list }} {{ [0,1,'',2]|select|list }} {{ [1,2,3]|reject('gt', 1)|list }}", {}),
    ("f_map", "{{ ['a','b']|map('upper')|list }} {{ [{'x':1},{}]|map(attribute='x', default=0)|list }} {{ [{'a': {'b': 2}}]|map(attribute='a.b')|list }} {{ [[1,2]]|map(attribute='1')|list }}", {}),
    ("f_unique_reverse_sort", "{{ [3,1,3,2]|unique|list }} {{ [1,2,3]|reverse|list }} {{ 'abc'|reverse }} {{ [3,1,2]|sort }} {{ ['b','A','c']|sort }} {{ ['b','A','c']|sort(case_sensitive=true) }} {{ [3,1,2]|sort(reverse=true) }}", {}),
    ("f_sort_attr", "{{ items|sort(attribute='n')|map(attribute='v')|join }}", {"items": [{"n": 2, "v": "b"}, {"n": 1, "v": "a"}, {"n": 3, "v": "c"}]}),
    ("f_dictsort", "{{ {'b': 1, 'A': 2, 'c': 0}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value') }} {{ {'b': 1, 'a': 2}|dictsort(reverse=true) }}", {}),
    ("f_int_float", "{{ '42'|int }} {{ ' 7 '|int }} {{ '3.9'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.9|int }} {{ true|int }} {{ '0x1A'|int(0, 16) }} {{ '2.5'|float }} {{ 'x'|float }} {{ 3|float }} {{ '1e3'|float }}", {}),
    ("f_abs_round", "{{ -3|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 2.1|round(method='ceil') }} {{ 2.9|round(method='floor') }} {{ 5|round }} {{ 1234|round(-2) }} {{ 1250|round(-2) }} {{ 1234.5|round(-2) }}", {}),
    ("f_safe_escape", "{{ '<a>'|e }} {{ '<a>'|safe }} {{ ('<b>'|safe) + '<i>' }} {{ '<i>' + ('<b>'|safe) }} {{ ('<b>'|safe) ~ '<i>' }} {{ '\"&\\''|escape }}", {}),
    ("f_indent", "{{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent(first=true, blank=true) }}|{{ 'x\ny'|indent('> ') }}", {}),
    ("f_wordcount", "{{ 'Hello, world! foo_bar 42'|wordcount }} {{ 'élan vital'|wordcount }}", {}),
    ("f_batch_slice", "{{ [1,2,3,4,5]|batch(2)|list }} {{ [1,2,3]|batch(2, 0)|list }} {{ [1,2,3,4,5]|slice(2)|list }}", {}),
    ("f_center_truncate", "[{{ 'ab'|center(7) }}] {{ 'hello world foo'|truncate(9) }} {{ 'hello world foo'|truncate(9, true) }} {{ 'short'|truncate(10) }}", {}),
    ("f_sum_min_max", "{{ [1,2,3]|sum }} {{ [{'v':1},{'v':2}]|sum(attribute='v') }} {{ [3,1,2]|min }} {{ [3,1,2]|max }} {{ ['b','A']|max }}", {}),
    ("f_format", "{{ '%s-%d-%05.2f|%x|%r'|format('a', 3.7, 2.5, 255, 'q') }} {{ '%(a)s'|format(a=1) }}", {}),
    ("f_attr", "[{{ {'a': 1}|attr('a') }}] {{ {'a': 1}|attr('items') is defined }}", {}),
    ("f_groupby", "{% for g in items|groupby('k') %}{{ g.grouper }}:{{ g.list|map(attribute='v')|join }};{% endfor %}", {"items": [{"k": "b", "v": 1}, {"k": "a", "v": 2}, {"k": "b", "v": 3}]}),
    ("f_chain", "{{ messages|map(attribute='content')|map('upper')|select('ne', 'HI')|list }}", {"messages": MSGS}),
    ("f_generator_print_len", "{{ [1,2]|select|length }}", {}),
    ("f_generator_truthy", "{{ 'y' if ([]|select) else 'n' }}", {}),
    ("unknown_filter", "{{ 1|frobnicate }}", {}),
    # --- tojson
    ("tojson_basic", "{{ v|tojson }}", {"v": {"a": 1, "b": 2.0, "c": 2.5, "d": [True, False, None], "e": "é\"\\\n\t<>&'\u0001\u007f\u2028", "f": {}, "g": []}}),
    ("tojson_indent", "{{ v|tojson(indent=2) }}", {"v": {"a": [1, {"b": None}], "c": {}, "d": []}}),
    ("tojson_indent_positional", "{{ v|tojson(False, 4) }}", {"v": [1, [2]]}),
    ("tojson_separators_sort", "{{ v|tojson(separators=(',', ':'), sort_keys=true) }} {{ v|tojson(ensure_ascii=true) }}", {"v": {"b": "é😀", "a": 1}}),
    ("tojson_scalars", "{{ 1|tojson }} {{ 1.0|tojson }} {{ 'x'|tojson }} {{ none|tojson }} {{ true|tojson }} {{ (1,2)|tojson }} {{ 1e100|tojson }}", {}),
    ("tojson_int_keys", "{{ {1: 'a', 2.5: 'b', true: 'c', none: 'd'}|tojson }}", {}),
    ("tojson_undefined_error", "{{ nope|tojson }}", {}),
    ("tojson_markup", "{{ ('<x>'|safe)|tojson }}", {}),
    ("tojson_big_numbers", "{{ v|tojson }}", {"v": [12345678901234567890123, 1e-7, 123456789.125, -0.0, 1e22, 1e21]}),
    # --- str methods
    ("m_strip", "[{{ ' a '.strip() }}][{{ 'xxaxx'.strip('x') }}][{{ '\n\na\n'.lstrip('\n') }}][{{ 'a\n\n'.rstrip('\n') }}][{{ ' \u3000a'.lstrip() }}]", {}),
    ("m_startswith", "{{ 'abc'.startswith('ab') }} {{ 'abc'.endswith('bc') }} {{ 'abc'.startswith(('x', 'a')) }} {{ 'abc'.startswith('b', 1) }}", {}),
    ("m_split", "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'a b c '.split(none, 1) }} {{ '  a b c'.rsplit(none, 1) }}", {}),
    ("m_split_think", "{% set c = '<think>\nr\n</think>\n\nans' %}[{{ c.split('</think>')[-1].lstrip('\n') }}][{{ c.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') }}]", {}),
    ("m_misc", "{{ 'Hello'.lower() }} {{ 'hello'.upper() }} {{ 'hello world'.title() }} {{ 'abcabc'.find('c') }} {{ 'abc'.find('z') }} {{ 'abcabc'.rfind('b') }} {{ 'aaa'.count('a') }} {{ '-'.join(['a', 'b']) }} {{ 'a\nb\r\nc'.splitlines() }}", {}),
    ("m_replace_count", "{{ 'aaaa'.replace('a', 'b', 2) }} {{ 'x'.replace('', '.') }}", {}),
    ("m_format", "{{ '{} {}'.format(1, 'a') }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{a}-{b!r}'.format(a=1, b='q') }} {{ '{:>5}|{:<4}|{:^6}|{:05d}|{:.2f}|{:,}'.format('ab', 'c', 'mid', 42, 3.14159, 1234567) }}", {}),
    ("m_predicates", "{{ '123'.isdigit() }} {{ 'abc'.isalpha() }} {{ 'a1'.isalnum() }} {{ '  '.isspace() }} {{ 'abc'.islower() }} {{ 'ABC'.isupper() }} {{ ''.isdigit() }}", {}),
    ("m_pad", "[{{ 'ab'.center(6, '*') }}][{{ 'ab'.ljust(4) }}][{{ 'ab'.rjust(4, '0') }}][{{ '-5'.zfill(4) }}]", {}),
    ("m_partition", "{{ 'a=b=c'.partition('=') }} {{ 'a=b=c'.rpartition('=') }} {{ 'abc'.partition('x') }}", {}),
    ("m_dict", "{{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 5) }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.items() }}", {"d": {"a": 1, "b": 2}}),
    ("m_list", "{{ l.count(1) }} {{ l.index(2) }}", {"l": [1, 2, 1]}),
    ("m_list_append_unsafe", "{{ l.append(1) }}", {"l": []}),
    ("m_dict_pop_unsafe", "{{ d.pop('a') }}", {"d": {"a": 1}}),
    ("m_call_undefined", "{{ d.content.startswith('x') }}", {"d": {}}),
    ("m_not_callable", "{{ d.a() }}", {"d": {"a": 1}}),
    ("m_str_upper_unicode", "{{ 'ﬁ ß'.upper() }}", {}),
    # --- errors and raise_exception
    ("raise", "{{ raise_exception('boom: ' ~ 1) }}", {}),
    ("raise_in_macro", "{% macro m() %}{{ raise_exception('inner') }}{% endmacro %}{{ m() }}", {}),
    ("err_add_str_int", "{{ 'a' + 1 }}", {}),
    ("err_add_int_str", "{{ 1 + 'a' }}", {}),
    ("err_add_undefined", "{{ 'a' + nope }}", {}),
    ("err_add_list_content", "{{ 'a' + l }}", {"l": [1]}),
    ("err_compare", "{{ 1 < 'a' }}", {}),
    ("err_zero_div", "{{ 1 / 0 }}", {}),
    ("err_in_none", "{{ 'a' in n }}", {"n": None}),
    ("err_in_str_int", "{{ 1 in 'abc' }}", {}),
    ("err_call_undefined", "{{ nope() }}", {}),
    ("err_undefined_sub", "{{ nope['x'] }}", {}),
    ("err_neg_str", "{{ -'a' }}", {}),
    ("err_unhashable", "{{ {[1]: 2} }}", {}),
    # --- syntax errors
    ("syn_unclosed_if", "{% if true %}x", {}),
    ("syn_unknown_tag", "{% frob %}", {}),
    ("syn_bad_endfor", "{% if true %}{% endfor %}", {}),
    ("syn_unclosed_var", "{{ 1 ", {}),
    ("syn_unclosed_comment", "{# abc", {}),
    ("syn_unexpected_char", "{{ a ! b }}", {}),
    ("syn_unbalanced", "{{ (1 }}", {}),
    ("syn_do_tag", "{% do x %}", {}),
    # --- misc features
    ("print_tag", "{% print 1, 2 %}", {}),
    ("block_tag", "a{% block b %}B{{ x }}{% endblock %}c", {"x": 1}),
    ("generation_tag", "{% generation %}gen{{ 1 }}{% endgeneration %}", {}),
    ("strftime", "{{ strftime_now('%Y-%m-%d %H:%M:%S %b %B %a %A %j %p %I %y') }}", {}),
    ("joiner", "{% set j = joiner(', ') %}{% for x in [1,2,3] %}{{ j() }}{{ x }}{% endfor %}", {}),
    ("percent_format", "{{ '%s and %s' % ('a', 'b') }} {{ '%d%%' % 50 }} {{ '%5.1f|%-4d|%+d|%x' % (3.14159, 7, 3, 255) }} {{ '%s' % [1] }} {{ '%(k)s' % {'k': 'v'} }}", {}),
    ("percent_format_g", "{{ '%g %g %g %e %.3g' % (0.0001, 123456789.0, 1.5, 1234.5, 0.000012345) }}", {}),
    ("big_ints", "{{ 2 ** 100 }} {{ (2 ** 100) // 3 }} {{ -(2 ** 64) % 7 }} {{ 2 ** 64 > 1e19 }} {{ 9007199254740993 == 9007199254740992.0 }}", {}),
    ("int_overflow_mul", "{{ 9223372036854775807 + 1 }} {{ 3037000500 * 3037000500 }} {{ -9223372036854775808 - 1 }}", {}),
    ("float_int_compare", "{{ 1 < 1.5 }} {{ 2 == 2.0 }} {{ 0.1 + 0.2 == 0.3 }}", {}),
    ("str_index_unicode", "{{ 'héllo'[1] }} {{ 'héllo'|length }} {{ '😀a'[0] }} {{ '😀a'|list }}", {}),
    ("dict_int_keys", "{{ {1: 'a'}[1] }} {{ {1: 'a'}[1.0] }} {{ {1: 'a'}[true] }}", {}),
    ("markup_concat_tojson", "{% set a = {'x': '<'}|tojson|safe %}{{ '\n<k>' ~ a ~ '</k>' }}", {}),
    ("markup_plus_plain", "{{ ('<a>'|safe + '<b>') }}", {}),
    ("undefined_eq", "{{ nope == nope2 }} {{ nope == none }} {{ nope != 1 }}", {}),
    ("none_attr_print", "[{{ none.x }}]", {}),
    ("nested_ns_in_list", "{% set ns = namespace(items=[]) %}{% set ns.items = ns.items + [1] %}{% set ns.items = ns.items + [2] %}{{ ns.items }}", {}),
    ("string_concat_in_loop", "{% set ns = namespace(s='') %}{% for m in messages %}{% set ns.s = ns.s + m.role[0] %}{% endfor %}{{ ns.s }}", {"messages": MSGS}),
    ("tools_none", "{% if tools %}T{% else %}F{% endif %}{{ tools is defined }}{{ tools is none }}{{ tools is iterable }}", {"tools": None}),
    ("content_list_parts", "{% for p in content %}{% if p.type == 'text' %}{{ p.text }}{% endif %}{% endfor %}{{ 'image' in content[1] }}", {"content": [{"type": "text", "text": "a"}, {"type": "image", "image": "x"}]}),
    ("tool_call_args_items", "{% for k, v in args|items %}{{ k }}={{ v|tojson if v is mapping or (v is sequence and v is not string) else v|string }};{% endfor %}", {"args": {"s": "x", "i": 2, "f": 2.0, "b": True, "n": None, "l": [1, "a"], "o": {"k": 2.5}}}),

    # --- constructs common in other Hugging Face chat templates (own snippets)
    ("hf_system_split", "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}{%- set messages = messages[1:] %}{%- else %}{%- set system_message = 'default' %}{%- endif %}[{{ system_message }}]{% for m in messages %}{{ m.role }};{% endfor %}", {"messages": MSGS}),
    ("hf_alternation_check", "{%- for message in messages %}{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif %}{{ message.role }}{%- endfor %}", {"messages": MSGS[1:]}),
    ("hf_alternation_fail", "{%- for message in messages %}{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{- raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{%- endif %}{%- endfor %}", {"messages": MSGS}),
    ("hf_custom_tools", "{%- if custom_tools is defined %}{%- set tools = custom_tools %}{%- endif %}{%- if not tools_in_user_message is defined %}{%- set tools_in_user_message = true %}{%- endif %}{{ tools|length }} {{ tools_in_user_message }}", {"custom_tools": [{"a": 1}], "tools": None}),
    ("hf_date_string", "{%- if not date_string is defined %}{%- if strftime_now is defined %}{%- set date_string = strftime_now('%d %b %Y') %}{%- else %}{%- set date_string = '26 Jul 2024' %}{%- endif %}{%- endif %}{{- 'Today Date: ' + date_string + '\n\n' }}", {}),
    ("hf_tools_indent4", "{%- for t in tools %}{{- t | tojson(indent=4) }}{{- '\n\n' }}{%- endfor %}", {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "number"}}}}}]}),
    ("hf_content_parts_join", "{% for m in messages %}{{ m.content if m.content is string else m.content|selectattr('type', 'equalto', 'text')|map(attribute='text')|join('\n') }}|{% endfor %}", {"messages": [{"content": "plain"}, {"content": [{"type": "text", "text": "a"}, {"type": "image"}, {"type": "text", "text": "b"}]}]}),
    ("hf_content_first_text", "{{ messages[0]['content'][0]['text'] }}", {"messages": [{"content": [{"type": "text", "text": "first"}]}]}),
    ("hf_first_system", "{{ (messages|selectattr('role', 'eq', 'system')|first).content }} {{ (messages|last).role }} {{ messages[-1]['content'] }}", {"messages": MSGS}),
    ("hf_loop_filter_first", "{%- for m in messages if m.role != 'system' %}{{ loop.first }}{{ loop.index }}{{ m.role }}{{ loop.revindex }} {% endfor %}", {"messages": MSGS}),
    ("hf_divisibleby_index", "{% for m in messages %}{{ loop.index0 is divisibleby 2 }}{% endfor %}", {"messages": MSGS}),
    ("hf_map_tojson", "{{ tools|map('tojson')|join('\n') }}", {"tools": [{"b": 1, "a": [1.5]}, {"c": None}]}),
    ("hf_sameas", "{{ 'y' if x is sameas true else 'n' }}{{ 'y' if y is sameas true else 'n' }}", {"x": True, "y": 1}),
    ("hf_not_none_not_string", "{% for x in [none, 'a', 1, [1]] %}{{ x is not none and x is not string }}{% endfor %}", {}),
    ("hf_items_sort", "{% for k, v in d.items()|sort %}{{ k }}{{ v }}{% endfor %} {{ d|dictsort|map('first')|list }}", {"d": {"b": 2, "a": 1, "c": 0}}),
    ("hf_range_map_string", "{{ range(3)|map('string')|join(',') }} {{ [1,2,3]|sum / 2 }} {{ 10 / 4 }} {{ 1e-5 }} {{ 123456789012345678.0 }}", {}),
    ("hf_dict_update_unsafe", "{% set d = {} %}{% set _ = d.update({'a': 1}) %}", {}),
    ("hf_nested_macro_ws", "{%- macro fmt(p) -%}\n    {%- if p.type == 'text' -%}\n        {{ p.text }}\n    {%- else -%}\n        [{{ p.type }}]\n    {%- endif -%}\n{%- endmacro -%}\n{% for p in parts %}\n  {{ fmt(p) }}\n{% endfor %}", {"parts": [{"type": "text", "text": "hi"}, {"type": "image"}]}),
    ("hf_comment_lines", "a\n{# comment #}\n  {#- dash comment -#}\nb\n    {# indented #}\nc", {}),
    ("hf_dash_newlines", "{{- 'x' -}}\n\n{{- 'y' }}\n{{ 'z' -}}\n   w", {}),
    ("hf_if_in_list", "{% for r in ['user', 'tool', 'x'] %}{{ r in ['user', 'assistant'] }}{{ r not in ('tool',) }}{% endfor %}", {}),
    ("hf_tool_call_json_manual", "{%- for tool_call in m.tool_calls %}{{- '{\"name\": \"' + tool_call.function.name + '\", \"arguments\": ' + (tool_call.function.arguments | tojson) + '}' }}{%- endfor %}", {"m": {"tool_calls": [{"function": {"name": "f", "arguments": {"a": 1, "b": "é"}}}]}}),
    ("hf_content_none_concat", "{{ '<|im_start|>' + m.role + '\n' + (m.content or '') }}", {"m": {"role": "assistant", "content": None}}),
    ("hf_content_none_in", "{{ '</think>' in m.content }}", {"m": {"content": None}}),
    ("hf_reasoning_split_trim", "{% set c = m.content %}{% if '</think>' in c %}{% set r = c.split('</think>')[0].strip() %}{% set c = c.split('</think>')[-1].strip() %}{% endif %}[{{ r }}][{{ c }}]", {"m": {"content": "<think> a </think> b "}}),
    ("hf_ns_in_macro_loop", "{% set ns = namespace(count=0) %}{% macro bump() %}{% set ns.count = ns.count + 1 %}{% endmacro %}{% for i in range(3) %}{{ bump() }}{% endfor %}{{ ns.count }}", {}),
    ("hf_string_escapes", r"""{{ "\\n" }}|{{ '\'' }}|{{ "tab\there" }}|{{ '\u4e2d' }}""", {}),
    ("hf_length_unicode_list", "{{ messages|length }} {{ messages[0].content|length }} {{ (messages|map(attribute='content')|list)[-1] }}", {"messages": [{"content": "日本語"}, {"content": "x"}]}),
    ("hf_loop_nextitem_role", "{% for m in messages %}{% if not loop.last and loop.nextitem.role == 'assistant' %}N{% endif %}{% if loop.previtem and loop.previtem.role == 'system' %}P{% endif %}{{ m.role[0] }}{% endfor %}", {"messages": MSGS}),
    ("hf_bool_kwargs", "{{ enable_thinking }} {{ enable_thinking is false }} {{ enable_thinking is defined and not enable_thinking }}", {"enable_thinking": False}),
    ("hf_float_kwargs", "{{ temp }} {{ temp * 2 }} {{ temp|string }} {{ n }} {{ n|float }}", {"temp": 0.7, "n": 3}),
    ("hf_deep_json", "{{ v|tojson }}", {"v": {"a": {"b": {"c": {"d": [[[{"e": 1.25e-10}]]]}}}}}),
    ("hf_set_tuple_swap", "{% set a, b = 1, 2 %}{% set a, b = b, a %}{{ a }}{{ b }}", {}),
    ("hf_call_kwargs_splat", "{% macro m(a, b) %}{{ a }}-{{ b }}{% endmacro %}{{ m(*[1, 2]) }} {{ m(**{'a': 3, 'b': 4}) }}", {}),
    ("hf_inline_if_chain_filters", "{{ (x | default('none')) | upper if x is defined else 'UNDEF' }}", {"x": "val"}),
    ("hf_keyword_as_name", "{{ d.in }} {{ d['if'] }} {{ d.for }}", {"d": {"in": 1, "if": 2, "for": 3}}),
    ("hf_tojson_indent_string", "{{ v|tojson(indent='\t') }}", {"v": {"a": [1]}}),
    ("hf_escape_in_repr", "{{ ['a\\\\b', \"it's\"] }}", {}),
    ("hf_whitespace_only_line", "{% for i in [1,2] %}\n   \n  {{ i }}\n{% endfor %}", {}),
    ("hf_block_in_loop_lstrip", "<ul>\n    {% for i in [1,2] %}\n    <li>{{ i }}</li>\n    {% endfor %}\n</ul>", {}),
    ("deep_recursion", "{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", {}),
]


def render(env, src, variables):
    try:
        t = env.from_string(src)
    except Exception as e:  # syntax errors
        return {"error_type": type(e).__name__, "error": str(e).split("\n")[0]}
    try:
        return {"expected": t.render(**variables)}
    except RecursionError as e:
        return {"error_type": "RecursionError", "error": str(e)}
    except Exception as e:
        return {"error_type": type(e).__name__, "error": str(e)}


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "conformance.json")
    env = make_env()
    names = set()
    cases = []
    for name, src, variables in CASES:
        assert name not in names, name
        names.add(name)
        case = {"name": name, "template": src, "vars": variables}
        case.update(render(env, src, variables))
        cases.append(case)
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"generator": "jinja2 " + jinja2.__version__, "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {len(cases)} cases to {out}")


if __name__ == "__main__":
    main()
