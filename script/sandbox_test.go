package script

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.starlark.net/starlark"

	"github.com/infernix/infernix/server"
)

// writeScripts writes files (name → source) into a new directory.
func writeScripts(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestDeepJSONDecode: go.starlark.net's json.decode recurses once per
// nesting level without a limit, so a reply of a couple of MB of "["
// (fed to json.decode by a tool-call parser) overflowed the Go stack, a
// fatal error that ends the process. Nesting beyond the limit is invalid
// JSON: decode returns its default, or fails the call.
func TestDeepJSONDecode(t *testing.T) {
	dir := writeScripts(t, map[string]string{"h.star": `
def route(request):
    n = int(request.user)
    deep = "[" * n + "]" * n
    obj = '{"a":' * n + "1" + "}" * n
    if request.model == "default":
        return {"model": str(json.decode(deep, None)) + "|" + str(json.decode(obj, "dflt"))}
    if request.model == "raise":
        json.decode(deep)
    if request.model == "string":
        # brackets inside strings are not nesting
        return {"model": str(len(json.decode(json.encode(["[" * n, "{" * n]))[0]))}
    return {"model": json.encode(json.decode(deep))[:20]}
`})
	e := load(t, dir, Options{Timeout: 20 * time.Second})
	for _, c := range []struct {
		model string
		n     int
		want  string // the routed model
		err   string // or an error holding this
	}{
		{"default", 3_000_000, "None|dflt", ""},
		{"raise", 3_000_000, "", "h.star:9: json.decode: nested deeper than 10000"},
		{"default", maxJSONDecodeDepth + 1, "None|dflt", ""},
		{"plain", maxJSONDecodeDepth, strings.Repeat("[", 20), ""},
		{"string", 3_000_000, "3000000", ""},
	} {
		r := req(c.model)
		r.User = strconv.Itoa(c.n)
		rt, err := e.Route(r)
		if c.err != "" {
			var he *HookError
			if !errors.As(err, &he) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s %d: err = %v, want a HookError holding %q", c.model, c.n, err, c.err)
			}
			continue
		}
		if err != nil || rt.Model != c.want {
			t.Errorf("%s %d: model %.40q, err %v; want %q", c.model, c.n, rt.Model, err, c.want)
		}
	}
}

// TestCallsValidated: a call's arguments must be a JSON object: the text
// "null" decoded into a nil map without error and was passed on.
func TestCallsValidated(t *testing.T) {
	dir := writeScripts(t, map[string]string{"h.star": `
def parse_tool_calls(text, tools):
    return ([{"name": "f", "arguments": text}], "")
`})
	e := load(t, dir, Options{})
	for _, c := range []struct {
		args string
		ok   bool
	}{
		{`{"a": 1}`, true},
		{`{}`, true},
		{` {"a": [1, null]} `, true},
		{`null`, false},
		{` null `, false},
		{`[1]`, false},
		{`"x"`, false},
		{`{"a": 1} x`, false},
		{``, false},
	} {
		calls, _, err := e.ParseToolCalls(c.args, nil)
		if c.ok {
			if err != nil || len(calls) != 1 || calls[0].Arguments != c.args {
				t.Errorf("%q: calls %+v, err %v", c.args, calls, err)
			}
			continue
		}
		var he *HookError
		if !errors.As(err, &he) || !strings.Contains(err.Error(), "is not a JSON object") || !strings.Contains(he.Pos, "h.star:2") {
			t.Errorf("%q: calls %+v, err %v; want a HookError at h.star:2", c.args, calls, err)
		}
	}
}

// TestReturnedJSONBounded: turning a returned value into JSON runs after
// the call, outside its step limit and timeout, so it must not loop over a
// lazy range of a billion ints or write gigabytes for a list repeating one
// big string.
func TestReturnedJSONBounded(t *testing.T) {
	dir := writeScripts(t, map[string]string{"h.star": `
def grammar(request):
    if request.model == "range":
        return {"type": "object", "enum": range(1000000000)}
    if request.model == "bytes":
        return {"type": "object", "x": b"abc"}
    if request.model == "big":
        return {"type": "object", "enum": ["x" * (1 << 24)] * 4096}
    if request.model == "ok":
        return {"type": "object", "enum": [(1, "a"), ["b"]], "n": None}
    return None

def on_response(request, response):
    return {"tool_calls": [{"name": "f", "arguments": {"a": range(1000000000)}}]}
`})
	e := load(t, dir, Options{})
	for _, c := range []struct{ model, want, err string }{
		{"range", "", "cannot encode a range as JSON"},
		{"bytes", "", "cannot encode a bytes as JSON"},
		{"big", "", "JSON text longer than"},
		{"ok", `{"type":"object","enum":[[1,"a"],["b"]],"n":null}`, ""},
	} {
		start := time.Now()
		g, err := e.Grammar(req(c.model))
		if c.err == "" {
			if err != nil || g != c.want {
				t.Errorf("%s: %s %v, want %s", c.model, g, err, c.want)
			}
		} else if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "h.star:2") {
			t.Errorf("%s: err = %v, want one at h.star:2 holding %q", c.model, err, c.err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s took %s", c.model, d)
		}
	}
	if _, err := e.EditResponse(req("x"), &server.HookResponse{}); err == nil || !strings.Contains(err.Error(), "cannot encode a range") {
		t.Errorf("on_response: %v", err)
	}
}

// TestRegexpCacheBounded: compiled patterns were cached forever, so a
// script building patterns from request fields grew the server's memory
// with every distinct request.
func TestRegexpCacheBounded(t *testing.T) {
	dir := writeScripts(t, map[string]string{"h.star": `
def route(request):
    m = re.search("^" + request.user + "$", request.user)
    return {"model": "ok" if m else "no"}
`})
	e := load(t, dir, Options{})
	for i := range 3 * maxReCache {
		r := req("m")
		r.User = "user-" + strconv.Itoa(i)
		if rt, err := e.Route(r); err != nil || rt.Model != "ok" {
			t.Fatalf("%d: %+v %v", i, rt, err)
		}
	}
	n := 0
	reCache.Range(func(any, any) bool { n++; return true })
	if n > maxReCache {
		t.Fatalf("%d patterns cached, want at most %d", n, maxReCache)
	}
}

// TestReSubBounded: re.sub is one step however large its result, so
// re.sub("", big, big) built len(big)² bytes; the result may now grow by
// at most maxReSubGrowth, and is otherwise Go's ReplaceAllString.
func TestReSubBounded(t *testing.T) {
	dir := writeScripts(t, map[string]string{"h.star": `
def route(request):
    s = "y" * (1 << 20)
    return {"model": re.sub("", "x" * (1 << 20), s)[:4]}
`})
	e := load(t, dir, Options{})
	start := time.Now()
	if _, err := e.Route(req("m")); err == nil || !strings.Contains(err.Error(), "re.sub: the result would exceed") ||
		!strings.Contains(err.Error(), "h.star:4") {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Errorf("took %s", d)
	}
	for _, pat := range []string{"", "a*", "a", "(a)(b)?", "x*", `\b`, "^", "$", "(?m)^", "é|", "[ab]+?"} {
		for _, repl := range []string{"", "-", "<$0>", "${1}x$2", "$$", "$9"} {
			for _, in := range []string{"", "a", "abab", "baaab", "aéb\nab", "xx"} {
				re := regexp.MustCompile(pat)
				got, err := reReplace(re, repl, in)
				if want := re.ReplaceAllString(in, repl); err != nil || string(got.(starlark.String)) != want {
					t.Errorf("sub(%q, %q, %q) = %v %v, want %q", pat, repl, in, got, err, want)
				}
			}
		}
	}
}

// TestJSONEncodeBounded: json.encode is one step however much it writes:
// json.encode(range(1 << 30)) or a list holding one sublist twice at each
// of 60 levels (2^60 values) ran on past the timeout, growing the heap
// without end. It now refuses text longer than maxJSONBytes, and otherwise
// gives go.starlark.net's output and errors.
func TestJSONEncodeBounded(t *testing.T) {
	dir := writeScripts(t, map[string]string{"h.star": `
def dag():
    x = ["0123456789" * 1000]
    for i in range(60):
        x = [x, x]
    return x

def cyclic():
    x = [1]
    x.append({"k": x})
    return x

VALUES = [None, True, 1, -2.5, "s\n\"", [1, (2, "x")], {"b": 1, "a": [None]}, struct(z = 1, y = {"k": "v"}),
          range(5), set([3]), "x" * 1000]

def route(request):
    if request.model == "range":
        json.encode(range(1 << 30))
    if request.model == "dag":
        json.encode(dag())
    if request.model == "cycle":
        json.encode(cyclic())
    if request.model == "intkey":
        json.encode([{1: 2}])
    out = []
    for v in VALUES:
        out.append(json.encode(v))
    return {"model": "|".join(out)}
`})
	e := load(t, dir, Options{Timeout: 30 * time.Second})
	for _, c := range []struct{ model, err string }{
		{"range", "h.star:18: json.encode: JSON text longer than"},
		{"dag", "h.star:20: json.encode: JSON text longer than"},
		{"cycle", "h.star:22: json.encode: at list index 1: in dict key \"k\": cycle in JSON structure"},
		{"intkey", "h.star:24: json.encode: at list index 0: dict has int key, want string"},
	} {
		start := time.Now()
		if _, err := e.Route(req(c.model)); err == nil || !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s: err = %v, want %q", c.model, err, c.err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%s took %s", c.model, d)
		}
	}
	rt, err := e.Route(req("values"))
	if err != nil {
		t.Fatal(err)
	}
	want := `null|true|1|-2.5|"s\n\""|[1,[2,"x"]]|{"a":[null],"b":1}|{"y":{"k":"v"},"z":1}|[0,1,2,3,4]|[3]|"` + strings.Repeat("x", 1000) + `"`
	if rt.Model != want {
		t.Fatalf("encoded %.300s, want %.300s", rt.Model, want)
	}
}
