package jinja

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"
)

// conformanceCase is one entry of testdata/conformance.json, produced by
// testdata/gen_conformance.py with jinja2 configured like transformers.
type conformanceCase struct {
	Name      string          `json:"name"`
	Template  string          `json:"template"`
	Vars      json.RawMessage `json:"vars"`
	Expected  *string         `json:"expected"`
	ErrorType string          `json:"error_type"`
	Error     string          `json:"error"`
}

// fixedNow is the clock gen_conformance.py gives strftime_now.
func fixedNow() time.Time { return time.Date(2024, 3, 5, 7, 8, 9, 0, time.UTC) }

// exactMessageTypes are the error classes whose message must match
// jinja2's word for word; for the others the class must match.
var exactMessageTypes = map[string]bool{
	"TemplateError":        true,
	"UndefinedError":       true,
	"TypeError":            true,
	"SecurityError":        true,
	"ValueError":           true,
	"OverflowError":        true,
	"TemplateRuntimeError": true,
}

func TestConformance(t *testing.T) {
	data, err := os.ReadFile("testdata/conformance.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Cases []conformanceCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		t.Fatal(err)
	}
	if len(file.Cases) < 100 {
		t.Fatalf("only %d conformance cases", len(file.Cases))
	}
	for _, c := range file.Cases {
		t.Run(c.Name, func(t *testing.T) {
			vars := map[string]Value{}
			v, err := DecodeJSON(c.Vars)
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range v.Dict().Keys() {
				vars[k.Str()] = v.Dict().Values()[i]
			}
			tmpl, err := Compile(c.Name, c.Template)
			var out string
			if err == nil {
				out, err = tmpl.ExecuteOptions(vars, Options{Now: fixedNow})
			}
			if c.Expected != nil {
				if err != nil {
					t.Fatalf("template %q: unexpected error %v; want %q", c.Template, err, *c.Expected)
				}
				if out != *c.Expected {
					t.Fatalf("template %q:\n got %q\nwant %q", c.Template, out, *c.Expected)
				}
				return
			}
			if err == nil {
				t.Fatalf("template %q: got %q, want %s: %s", c.Template, out, c.ErrorType, c.Error)
			}
			checkErrorMatches(t, err, c.ErrorType, c.Error)
		})
	}
}

// checkErrorMatches compares a Go error with the jinja2 exception class
// and message recorded for the same template.
func checkErrorMatches(t *testing.T, err error, typ, msg string) {
	t.Helper()
	var te *TemplateError
	var se *SyntaxError
	var re *RuntimeError
	switch {
	case typ == "TemplateSyntaxError" || typ == "TemplateAssertionError":
		if !errors.As(err, &se) {
			t.Fatalf("got %T %v, want syntax error %q", err, err, msg)
		}
		if se.Msg != msg {
			t.Logf("syntax message differs: got %q want %q", se.Msg, msg)
		}
	case typ == "TemplateError":
		if !errors.As(err, &te) || te.Message != msg {
			t.Fatalf("got %T %v, want TemplateError %q", err, err, msg)
		}
	default:
		if !errors.As(err, &re) {
			t.Fatalf("got %T %v, want %s: %s", err, err, typ, msg)
		}
		if re.Type != typ && !(typ == "RecursionError" && re.Type == "LimitError") {
			t.Fatalf("got %s: %s, want %s: %s", re.Type, re.Msg, typ, msg)
		}
		if exactMessageTypes[typ] && re.Msg != msg {
			t.Fatalf("got message %q, want %q", re.Msg, msg)
		}
	}
}
