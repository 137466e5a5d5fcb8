package toolcall

import (
	"encoding/json"
	"strings"
	"testing"
)

// scanObject runs jscan over s and reports where the top-level object ended
// (-1 if it did not) and whether an error was found before.
func scanObject(s string) (end int, bad bool) {
	var j jscan
	j.reset()
	for i := 0; i < len(s); i++ {
		switch j.step(s[i]) {
		case jErr:
			return -1, true
		case jDone:
			return i + 1, false
		}
	}
	return -1, false
}

func TestJSONScan(t *testing.T) {
	valid := []string{
		`{}`, `{"a":1}`, ` {"a" : [1, -2.5e+3, 0, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9"], "b": {"c": {}}}`,
		`{"a":[[],[{}]],"b":-0.0E-0}`, "{\n\t\"k\" :\r\n \"v\"\n}",
	}
	for _, s := range valid {
		s = strings.TrimLeft(s, " ")
		end, bad := scanObject(s)
		if bad || end != len(s) {
			t.Errorf("%q: end %d bad %v", s, end, bad)
		}
	}
	invalid := []string{
		`{"a":}`, `{"a" 1}`, `{a:1}`, `{"a":1,}`, `{"a":[1,]}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`,
		`{"a":tru}x`, `{"a":"\x"}`, `{"a":"\u12g4"}`, "{\"a\":\"\n\"}", `{"a":1]`, `{"a":[1}`, `[1]`, `{"a":1 "b":2}`, `{,}`, `{"a":+1}`,
	}
	for _, s := range invalid {
		if end, bad := scanObject(s); !bad && end == len(s) {
			t.Errorf("%q accepted", s)
		}
	}
	if end, _ := scanObject(`{"a":"}"} tail`); end != 9 {
		t.Errorf("end of object: %d", end)
	}
}

// FuzzJSONScan: the scanner agrees with encoding/json on where an object ends.
func FuzzJSONScan(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,2,{"b":null}]}`, `{"a":1e5}`, `{"a":"\u0041"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" || s[0] != '{' {
			return
		}
		end, bad := scanObject(s)
		if end > 0 {
			if !json.Valid([]byte(s[:end])) {
				t.Fatalf("scanner accepted invalid %q", s[:end])
			}
			return
		}
		if !bad && json.Valid([]byte(s)) {
			t.Fatalf("scanner did not find the end of valid %q", s)
		}
		if bad && json.Valid([]byte(s)) {
			t.Fatalf("scanner rejected valid %q", s)
		}
	})
}
