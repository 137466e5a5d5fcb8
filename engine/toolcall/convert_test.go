package toolcall

import (
	"encoding/json"
	"testing"
)

func TestAppendValue(t *testing.T) {
	tests := []struct {
		raw   string
		kinds []kind
		want  string
	}{
		{"Paris", nil, `"Paris"`},
		{"42", nil, `"42"`},
		{"42", []kind{kString}, `"42"`},
		{" 42 ", []kind{kInteger}, `42`},
		{"-0", []kind{kInteger}, `-0`},
		{"123456789012345678901234567890", []kind{kInteger}, `123456789012345678901234567890`},
		{"5.0", []kind{kInteger}, `5`},
		{"+7", []kind{kInteger}, `7`},
		{"5.5", []kind{kInteger}, `"5.5"`},
		{"0x10", []kind{kInteger}, `"0x10"`},
		{"007", []kind{kInteger}, `7`},
		{"1.50", []kind{kNumber}, `1.50`},
		{".5", []kind{kNumber}, `0.5`},
		{"5.", []kind{kNumber}, `5`},
		{"NaN", []kind{kNumber}, `"NaN"`},
		{"inf", []kind{kNumber}, `"inf"`},
		{"1,5", []kind{kNumber}, `"1,5"`},
		{"True", []kind{kBoolean}, `true`},
		{"false", []kind{kBoolean}, `false`},
		{"yes", []kind{kBoolean}, `"yes"`},
		{"None", []kind{kNull}, `null`},
		{"null", []kind{kString, kNull}, `null`},
		{"abc", []kind{kString, kNull}, `"abc"`},
		{"{\"b\": 1, \"a\": [1, 2]}", []kind{kObject}, `{"b":1,"a":[1,2]}`},
		{"[1, 2]", []kind{kObject}, `"[1, 2]"`},
		{"[1, {\"x\": null}]", []kind{kArray}, `[1,{"x":null}]`},
		{"{'a': 1}", []kind{kObject}, `"{'a': 1}"`},
		{"\n 3 \n", []kind{kInteger, kString}, `3`},
		{"x", []kind{kInteger, kBoolean}, `"x"`},
		{"line1\n\"q\"\t\\\x01é", nil, `"line1\n\"q\"\t\\\u0001é"`},
	}
	for _, tt := range tests {
		got := string(appendValue(nil, tt.raw, tt.kinds))
		if got != tt.want {
			t.Errorf("appendValue(%q, %v) = %s, want %s", tt.raw, tt.kinds, got, tt.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("appendValue(%q) = %s: not JSON", tt.raw, got)
		}
	}
}

// TestEscapeMatchesEncodingJSON: the escaped text decodes back to the input.
func TestEscapeRoundTrip(t *testing.T) {
	for _, s := range []string{"", "plain", "\x00\x1f\x7f\"\\/<>&\u2028", "日本語\n\r\t\b\f"} {
		var back string
		if err := json.Unmarshal(appendString(nil, s), &back); err != nil || back != s {
			t.Errorf("%q: got %q, %v", s, back, err)
		}
	}
}

func TestIsJSONNumber(t *testing.T) {
	for s, want := range map[string]bool{
		"0": true, "-0": true, "12": true, "1.5": true, "1e5": true, "1E+5": true, "-1.5e-3": true,
		"": false, "-": false, "01": false, "1.": false, ".1": false, "1e": false, "+1": false, "1.5.": false, "0x1": false,
	} {
		if got := isJSONNumber(s); got != want {
			t.Errorf("isJSONNumber(%q) = %v", s, got)
		}
	}
}

func TestSchemaKinds(t *testing.T) {
	ts := newToolSet([]Tool{
		{Name: "f", Parameters: []byte(`{"type":"object","properties":{
			"a":{"type":"integer"},"b":{"type":["null","number"]},"c":{"anyOf":[{"type":"string"},{"type":"boolean"}]},
			"d":{"enum":["x"]},"e":{"type":"weird"},"g":{"oneOf":[{"type":"array"}]}}}`)},
		{Name: "broken", Parameters: []byte(`{"properties": 5}`)},
		{Name: "none"},
	})
	want := map[string][]kind{"a": {kInteger}, "b": {kNull, kNumber}, "c": {kString, kBoolean}, "d": nil, "e": nil, "g": {kArray}}
	for p, w := range want {
		if got := ts.kinds("f", p); !equalKinds(got, w) {
			t.Errorf("%s: got %v want %v", p, got, w)
		}
	}
	if ts.kinds("broken", "x") != nil || ts.kinds("none", "x") != nil || ts.kinds("missing", "x") != nil {
		t.Error("unreadable schemas must give no types")
	}
	if !ts.declared("none") || ts.declared("missing") {
		t.Error("declared")
	}
	if open := newToolSet(nil); !open.declared("anything") {
		t.Error("without tools every name is declared")
	}
}

func equalKinds(a, b []kind) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestHeaderName(t *testing.T) {
	for h, want := range map[string]string{
		"=city": "city", "= city ": "city", `="city"`: "city", ` name="city"`: "city", ` name = 'city'`: "city",
		" city": "city", "=name_tool": "name_tool", " namespace": "namespace", "=": "", `=""`: "", "=a b": "a b",
	} {
		if got := headerName(h); got != want {
			t.Errorf("headerName(%q) = %q, want %q", h, got, want)
		}
	}
}
