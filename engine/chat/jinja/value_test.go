package jinja

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestFormatFloat(t *testing.T) {
	tenth := 0.1 // a variable, so the sum is computed in float64
	for _, c := range []struct {
		f    float64
		want string
	}{
		{2, "2.0"}, {2.5, "2.5"}, {0.1, "0.1"}, {math.Copysign(0, -1), "-0.0"}, {1e16, "1e+16"}, {1e15, "1000000000000000.0"},
		{0.0001, "0.0001"}, {0.00001, "1e-05"}, {1.5e-7, "1.5e-07"}, {123456789.125, "123456789.125"},
		{1e22, "1e+22"}, {1.7976931348623157e308, "1.7976931348623157e+308"}, {5e-324, "5e-324"},
		{math.Inf(1), "inf"}, {math.Inf(-1), "-inf"}, {math.NaN(), "nan"}, {tenth + 2*tenth, "0.30000000000000004"},
		{-1234.5, "-1234.5"}, {1e100, "1e+100"},
	} {
		if got := formatFloat(c.f); got != c.want {
			t.Errorf("formatFloat(%v) = %q, want %q", c.f, got, c.want)
		}
	}
}

func TestDecodeJSONKeepsOrderAndNumberKinds(t *testing.T) {
	v, err := DecodeJSON([]byte(` {"z": 1, "a": 2.0, "m": [1e2, -0, 12345678901234567890123, 2.5E-3], "dup": 1, "s": "\u00e9\ud83d\ude00\n", "dup": 2} `))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pyRepr(v), `{'z': 1, 'a': 2.0, 'm': [100.0, 0, 12345678901234567890123, 0.0025], 'dup': 2, 's': 'é😀\n'}`; got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	s, err := DumpJSON(v, JSONOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"z": 1, "a": 2.0, "m": [100.0, 0, 12345678901234567890123, 0.0025], "dup": 2, "s": "é😀\n"}`; s != want {
		t.Fatalf("DumpJSON = %s, want %s", s, want)
	}
}

func TestDecodeJSONErrors(t *testing.T) {
	for _, in := range []string{``, `{`, `[1,]`, `{"a" 1}`, `01`, `1.`, `"\x"`, "\"a\x01\"", `tru`, `[1] x`, `{"a":1,}`, `"\u12"`, strings.Repeat("[", 2000)} {
		if _, err := DecodeJSON([]byte(in)); err == nil {
			t.Errorf("DecodeJSON(%q) succeeded", in)
		}
	}
	for in, want := range map[string]string{
		`NaN`: "nan", `-Infinity`: "-inf", `1e400`: "inf", `"\ud800"`: "'\ufffd'", "\"a\xffb\"": "'a\ufffdb'",
	} {
		v, err := DecodeJSON([]byte(in))
		if err != nil {
			t.Errorf("DecodeJSON(%q): %v", in, err)
			continue
		}
		if got := pyRepr(v); got != want {
			t.Errorf("DecodeJSON(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestDumpJSONOptions(t *testing.T) {
	v, err := DecodeJSON([]byte(`{"b": [1, {"c": null}], "a": "x\u007f\u0001é😀", "e": {}, "f": []}`))
	if err != nil {
		t.Fatal(err)
	}
	two := "  "
	for _, c := range []struct {
		o    JSONOptions
		want string
	}{
		{JSONOptions{}, `{"b": [1, {"c": null}], "a": "x` + "\x7f" + `\u0001é😀", "e": {}, "f": []}`},
		{JSONOptions{EnsureASCII: true, SortKeys: true}, `{"a": "x\u007f\u0001\u00e9\ud83d\ude00", "b": [1, {"c": null}], "e": {}, "f": []}`},
		{JSONOptions{Indent: &two}, "{\n  \"b\": [\n    1,\n    {\n      \"c\": null\n    }\n  ],\n  \"a\": \"x\x7f\\u0001é😀\",\n  \"e\": {},\n  \"f\": []\n}"},
		{JSONOptions{ItemSep: ",", KeySep: ":", separatorSet: true}, `{"b":[1,{"c":null}],"a":"x` + "\x7f" + `\u0001é😀","e":{},"f":[]}`},
	} {
		got, err := DumpJSON(v, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("DumpJSON(%+v)\n got %q\nwant %q", c.o, got, c.want)
		}
	}
}

func TestDictPythonKeys(t *testing.T) {
	d := NewDict()
	for i := 0; i < 20; i++ { // crosses the index threshold
		_ = d.Set(Int(int64(i)), Int(int64(i)))
	}
	_ = d.Set(Float(3.0), String("three"))
	_ = d.Set(Bool(true), String("one"))
	if d.Len() != 20 {
		t.Fatalf("len %d, want 20 (1 == 1.0 == True)", d.Len())
	}
	if v, ok, _ := d.Get(Int(3)); !ok || v.Str() != "three" {
		t.Fatalf("d[3] = %v %v", v, ok)
	}
	if err := d.Set(NewList(nil), None()); err == nil {
		t.Fatal("list key accepted")
	}
	tup := NewTuple([]Value{Int(1), String("a")})
	_ = d.Set(tup, String("t"))
	if v, ok, _ := d.Get(NewTuple([]Value{Float(1), String("a")})); !ok || v.Str() != "t" {
		t.Fatal("tuple key lookup failed")
	}
}

func render(t *testing.T, src string, vars map[string]Value) (string, error) {
	t.Helper()
	tm, err := Compile("test", src)
	if err != nil {
		return "", err
	}
	return tm.Execute(vars)
}

func TestLimits(t *testing.T) {
	for _, c := range []struct {
		name, src string
		typ       string
	}{
		{"infinite_loop", "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "LimitError"},
		{"recursion", "{% macro r() %}{{ r() }}{% endmacro %}{{ r() }}", "RecursionError"},
		{"string_doubling", "{% set ns = namespace(s='xxxxxxxx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "LimitError"},
		{"repeat", "{{ 'x' * 10**12 }}", "LimitError"},
		{"list_doubling", "{% set ns = namespace(l=[1]) %}{% for i in range(40) %}{% set ns.l = ns.l + ns.l %}{% endfor %}", "LimitError"},
		{"huge_pow", "{{ 7 ** (10 ** 9) }}", "LimitError"},
		{"center", "{{ 'x'.center(10**12) }}", "LimitError"},
		{"zfill", "{{ 'x'.zfill(10**12) }}", "LimitError"},
		{"percent_star_width", "{{ '%*d' % (10**9, 1) }}", "LimitError"},
		{"percent_star_prec", "{{ '%.*f' % (10**9, 1.0) }}", "LimitError"},
		{"slice_count", "{{ [1, 2]|slice(10**9)|list|length }}", "LimitError"},
		{"batch_fill", "{{ [1, 2]|batch(10**9, 0)|list|length }}", "LimitError"},
		{"shared_tuple_key", "{% set t = ((((((((((((1,)*10,)*10,)*10,)*10,)*10,)*10,)*10,)*10,)*10,)*10,)*10,) %}{{ {t: 1}|length }}", "LimitError"},
		{"indent_blank", "{{ ('\\n' * 100000)|indent('x' * 1000000, blank=true) }}", "LimitError"},
		{"pad_wide_fill", "{{ 'x'.center(60000000, '\U0001F600')|length }}", "LimitError"},
		{"shared_list_equal", "{% set a = [[[[[[[[[[[[1]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10] %}{% set b = [[[[[[[[[[[[1]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10] %}{{ a == b }}", "LimitError"},
		{"shared_list_less", "{% set a = [[[[[[[[[[[[1]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10] %}{% set b = [[[[[[[[[[[[1]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10] %}{{ a < b }}", "LimitError"},
		{"shared_list_sort", "{% set a = [[[[[[[[[[[[1]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10] %}{% set b = [[[[[[[[[[[[1]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10]*10] %}{{ [a, b]|sort|length }}", "LimitError"},
		{"iterate_huge_string", "{% set s = 'x' * 60000000 %}{{ s|list|length }}", "LimitError"},
		{"split_huge_string", "{% set s = 'x' * 60000000 %}{{ s.split('x')|length }}", "LimitError"},
		{"split_whitespace_huge_string", "{% set s = 'x ' * 30000000 %}{{ s.split()|length }}", "LimitError"},
		{"splitlines_huge_string", "{% set s = 'x\\n' * 30000000 %}{{ s.splitlines()|length }}", "LimitError"},
		{"shared_tuple_unique", "{% set t = ((((((((((((1,)*10,)*10,)*10,)*10,)*10,)*10,)*10,)*10,)*10,)*10,)*10,) %}{{ [t, 2]|unique|list|length }}", "LimitError"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tm, err := Compile(c.name, c.src)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = tm.ExecuteOptions(nil, Options{MaxSteps: 300_000})
			var re *RuntimeError
			if !errors.As(err, &re) || re.Type != c.typ {
				t.Fatalf("got %v, want %s", err, c.typ)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("took %v to fail", d)
			}
		})
	}
}

func TestDeepNestingIsASyntaxError(t *testing.T) {
	src := "{{ " + strings.Repeat("(", 5000) + "1" + strings.Repeat(")", 5000) + " }}"
	_, err := Compile("deep", src)
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("got %v, want a syntax error", err)
	}
}

func TestSyntaxErrorLine(t *testing.T) {
	_, err := Compile("t.jinja", "line1\n{% if x %}\n{{ a + }}\n{% endif %}")
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("got %v", err)
	}
	if se.Line != 3 || se.Name != "t.jinja" || !strings.Contains(se.Error(), "line 3") {
		t.Fatalf("got %+v", se)
	}
}

func TestRuntimeErrorLine(t *testing.T) {
	_, err := render(t, "a\n\n{{ 1 + 'x' }}", nil)
	var re *RuntimeError
	if !errors.As(err, &re) || re.Line != 3 || re.Type != "TypeError" {
		t.Fatalf("got %#v", err)
	}
}

func TestConcurrentExecute(t *testing.T) {
	tm, err := Compile("c", "{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}")
	if err != nil {
		t.Fatal(err)
	}
	xs := NewList([]Value{Int(1), Int(2), Int(3)})
	done := make(chan string, 8)
	for i := 0; i < 8; i++ {
		go func() {
			out, _ := tm.Execute(map[string]Value{"xs": xs})
			done <- out
		}()
	}
	for i := 0; i < 8; i++ {
		if got := <-done; got != "6" {
			t.Fatalf("got %q", got)
		}
	}
}

func TestStrftime(t *testing.T) {
	out, err := Compile("s", `{{ strftime_now("%d %b %Y") }}|{{ strftime_now("%-d %B, %A %H:%M") }}`)
	if err != nil {
		t.Fatal(err)
	}
	got, err := out.ExecuteOptions(nil, Options{Now: fixedNow})
	if err != nil {
		t.Fatal(err)
	}
	if want := "05 Mar 2024|5 March, Tuesday 07:08"; got != want {
		t.Fatalf("got %q want %q", got, want)
	}
}
