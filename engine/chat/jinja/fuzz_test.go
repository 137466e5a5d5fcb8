package jinja

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"
)

// fuzzSeeds adds every conformance template and the Qwen templates.
func fuzzSeeds(f *testing.F, add func(src string)) {
	data, err := os.ReadFile("testdata/conformance.json")
	if err != nil {
		f.Fatal(err)
	}
	var file struct {
		Cases []conformanceCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		f.Fatal(err)
	}
	for _, c := range file.Cases {
		add(c.Template)
	}
	for _, name := range []string{"Qwen-Qwen3-0.6B.jinja", "Qwen3-Coder.jinja", "Qwen3.5-4B.jinja"} {
		src, err := os.ReadFile("../../../tests/testdata/chat-templates/" + name)
		if err != nil {
			f.Fatal(err)
		}
		add(string(src))
	}
}

// checkError requires one of the package's documented error types.
func checkError(t *testing.T, err error) {
	if err == nil {
		return
	}
	var se *SyntaxError
	var re *RuntimeError
	var te *TemplateError
	if !errors.As(err, &se) && !errors.As(err, &re) && !errors.As(err, &te) {
		t.Fatalf("unexpected error type %T: %v", err, err)
	}
}

var fuzzVars = `{"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u <tool_response>"},
 {"role": "assistant", "content": "<think>\nr\n</think>\n\na", "tool_calls": [{"function": {"name": "f", "arguments": {"a": [1, 2.5, null]}}}]},
 {"role": "tool", "content": "t"}], "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "array"}}}}}],
 "add_generation_prompt": true, "x": 1, "s": "héllo", "l": [3, 1, 2], "d": {"k": "v", "n": {"m": 1}}}`

// FuzzCompile feeds arbitrary template sources to the lexer, parser and
// evaluator: they must never panic or hang, only return documented errors.
func FuzzCompile(f *testing.F) {
	fuzzSeeds(f, func(src string) { f.Add(src) })
	v, err := DecodeJSON([]byte(fuzzVars))
	if err != nil {
		f.Fatal(err)
	}
	vars := map[string]Value{}
	for i, k := range v.Dict().Keys() {
		vars[k.Str()] = v.Dict().Values()[i]
	}
	f.Fuzz(func(t *testing.T, src string) {
		start := time.Now()
		tm, err := Compile("fuzz", src)
		checkError(t, err)
		if err != nil {
			return
		}
		_, err = tm.ExecuteOptions(vars, Options{MaxSteps: 20_000, Now: fixedNow})
		checkError(t, err)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("took %v", d)
		}
	})
}

// FuzzRender renders fixed templates over arbitrary JSON variables.
func FuzzRender(f *testing.F) {
	var templates []*Template
	fuzzSeeds(f, func(src string) {
		if tm, err := Compile("seed", src); err == nil {
			templates = append(templates, tm)
		}
	})
	f.Add(uint16(0), fuzzVars)
	f.Add(uint16(len(templates)-1), fuzzVars)
	f.Add(uint16(len(templates)-2), `{"messages": [{"role": "user", "content": [{"type": "image"}, {"text": "x"}]}], "tools": {"a": 1}}`)
	f.Add(uint16(len(templates)-3), `{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"function": {"name": 1, "arguments": "x"}}]}]}`)
	f.Fuzz(func(t *testing.T, which uint16, varsJSON string) {
		v, err := DecodeJSON([]byte(varsJSON))
		if err != nil || v.Dict() == nil {
			return
		}
		vars := map[string]Value{}
		for i, k := range v.Dict().Keys() {
			if k.Kind() == KindString {
				vars[k.Str()] = v.Dict().Values()[i]
			}
		}
		tm := templates[int(which)%len(templates)]
		start := time.Now()
		_, err = tm.ExecuteOptions(vars, Options{MaxSteps: 50_000, Now: fixedNow})
		checkError(t, err)
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("took %v", d)
		}
	})
}

// FuzzDecodeJSON checks that decoding never panics and that what decodes
// survives a DumpJSON round trip unchanged.
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{fuzzVars, `[1, 2.0, -0.0, 1e400, "\ud83d\ude00", {"a": {"b": []}}]`, `"\u0000\u001f\"\\/"`, `NaN`, `123456789012345678901234567890`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := DecodeJSON(data)
		if err != nil {
			return
		}
		s, err := DumpJSON(v, JSONOptions{})
		if err != nil {
			t.Fatalf("DumpJSON: %v", err)
		}
		w, err := DecodeJSON([]byte(s))
		if err != nil {
			t.Fatalf("re-decoding %q: %v", s, err)
		}
		if a, b := pyRepr(v), pyRepr(w); a != b {
			t.Fatalf("round trip changed the value:\n%s\n%s", a, b)
		}
	})
}
