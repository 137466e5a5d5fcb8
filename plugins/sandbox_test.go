package plugins

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/infernix/infernix/server"
)

// onRequestHost loads one plugin whose on_request runs body (with the
// request in r).
func onRequestHost(t *testing.T, body string, opts Options) *Host {
	t.Helper()
	dir := t.TempDir()
	src := "function on_request(r)\n" + body + "\nend\n"
	if err := os.WriteFile(filepath.Join(dir, "p.lua"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return load(t, dir, opts)
}

// TestRunawayStringFunctions: string functions whose Go code the context
// does not interrupt (a backtracking pattern, string.rep of a huge size)
// fail the call at its deadline or limit instead of hanging the server or
// exhausting its memory.
func TestRunawayStringFunctions(t *testing.T) {
	const subject = `local s = string.rep("a", 400)` + "\n"
	cases := []struct {
		name, body, want string
		timeout          time.Duration // default 100ms
	}{
		{"find", subject + `string.find(s, ".-.-.-.-.-x")`, "string.find: context deadline exceeded", 0},
		{"find method", subject + `s:find(".-.-.-.-.-x", 2)`, "string.find: context deadline exceeded", 0},
		{"match", subject + `string.match(s, "(.-)(.-)(.-)(.-)(.-)x")`, "string.match: context deadline exceeded", 0},
		{"gmatch", subject + `for x in string.gmatch(s, ".-.-.-.-.-x") do end`, "string.gmatch: context deadline exceeded", 0},
		{"gfind", subject + `for x in string.gfind(s, ".-.-.-.-.-x") do end`, "string.gfind: context deadline exceeded", 0},
		{"gsub", subject + `string.gsub(s, "a*a*a*a*a*x", "")`, "string.gsub: context deadline exceeded", 0},
		{"gsub function", subject + `s:gsub(".-.-.-.-.-x", function(m) return m end)`, "string.gsub: context deadline exceeded", 0},
		{"gsub bomb", `local s = string.rep("x", 1e5) string.gsub(s, "", s)`, "string.gsub: the result would exceed", 2 * time.Second},
		{"gsub bomb function", `local s = string.rep("x", 1e5) string.gsub(s, "", function() return s end)`, "string.gsub: the result would exceed", 2 * time.Second},
		{"concat bomb", `local s = string.rep("x", 1e6) local t = {} for i = 1, 1e5 do t[i] = s end table.concat(t)`, "table.concat: the result would exceed", 2 * time.Second},
		{"rep", `local s = string.rep("x", 1e12)`, "string.rep: the result would exceed", 0},
		{"rep method", `local s = ("xyz"):rep(2^40)`, "string.rep: the result would exceed", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.timeout == 0 {
				c.timeout = 100 * time.Millisecond
			}
			h := onRequestHost(t, c.body, Options{Timeout: c.timeout})
			start := time.Now()
			done := make(chan struct{})
			var rej *server.Rejection
			var err error
			go func() {
				defer close(done)
				rej, err = h.FilterRequest(req("m", ""))
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatalf("the call is still running after 10s (timeout %s)", c.timeout)
			}
			if err == nil || rej != nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "p.lua:") {
				t.Fatalf("rej=%+v err=%v, want an error at p.lua holding %q", rej, err, c.want)
			}
			d := time.Since(start)
			if d > 3*time.Second {
				t.Errorf("took %s", d)
			}
			// A runaway pattern stops at the deadline, within the ~100ms
			// of polling and unwinding allowed here.
			if strings.Contains(c.want, "deadline") && d > c.timeout+100*time.Millisecond {
				t.Errorf("took %s, timeout %s", d, c.timeout)
			}
			// The host keeps serving.
			if _, err := h.FilterRequest(req("m", "")); err == nil {
				t.Errorf("the second call succeeded")
			}
		})
	}
}

// TestGsubLinear: gopher-lua's gsub copies the whole string for every
// match (100k matches on 200 KB copy 20 GB in uninterruptible Go code);
// the replacement builds the result in one pass, well inside the timeout.
func TestGsubLinear(t *testing.T) {
	h := onRequestHost(t, `local s = string.rep("a ", 100000)
local r, n = s:gsub(" ", "_")
return {status = 400, message = n .. " " .. #r .. " " .. r:sub(1, 6)}`, Options{Timeout: 2 * time.Second})
	start := time.Now()
	rej, err := h.FilterRequest(req("m", ""))
	if err != nil || rej == nil || rej.Message != "100000 200000 a_a_a_" {
		t.Fatalf("rej=%+v err=%v", rej, err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %s", d)
	}
}

// TestStringFunctionsUnchanged: the guarded string functions give stock
// gopher-lua's results (and errors) on ordinary calls.
func TestStringFunctionsUnchanged(t *testing.T) {
	exprs := []string{
		`string.find("hello world", "o w")`,
		`string.find("hello world", "l+")`,
		`string.find("hello world", "o", 6)`,
		`string.find("hello world", "o", -3)`,
		`string.find("hello world", "o", 100)`,
		`string.find("a.b", ".", 1, true)`,
		`string.find("abc", "")`,
		`string.find("key = value", "(%w+)%s*=%s*(%w+)")`,
		`string.find("abc", "()b()")`,
		`("  trim me  "):match("^%s*(.-)%s*$")`,
		`string.match("2026-12-07", "(%d+)-(%d+)-(%d+)")`,
		`string.match("abc", "b", -2)`,
		`string.match("abc", "x")`,
		`string.gsub("hello world", "o", "0")`,
		`string.gsub("hello world", "(%w+)", "<%1>")`,
		`string.gsub("hello world", "%w+", "x", 1)`,
		`string.gsub("abc", "%w", {a = "1", b = true})`,
		`string.gsub("abc", "%w", function(c) return c:upper() end)`,
		`string.gsub("f(a(b)c)", "%b()", "")`,
		`string.rep("ab", 3)`,
		`string.rep("ab", 0)`,
		`string.rep("ab", -1)`,
		`string.rep("", 1e12)`,
		`string.find("abc", "[a")`,
		`string.gsub("abc", "(", "")`,
		`string.rep()`,
		`string.gsub("hello", "", "-")`,
		`string.gsub("hello", "l*", "<%0>")`,
		`string.gsub("hello world", "(o)", "%1%1%%%x%")`,
		`string.gsub("hello", "()l", "%1")`,
		`string.gsub("hello", "l", "%2")`,
		`string.gsub("hello", "(l)", "%2")`,
		`string.gsub("hello", "l", "%1")`,
		`string.gsub("hello", "(h)(e)", {h = "H"})`,
		`string.gsub("hello", "()e", {[2] = "E"})`,
		`string.gsub("hello", ".", {h = 1, e = false, l = {}})`,
		`string.gsub("hello", "(l)(l)", function(a, b) return b .. a .. "!" end)`,
		`string.gsub("hello", "l", function() return nil end)`,
		`string.gsub("hello", "x", "y")`,
		`string.gsub("hello", "l", "L", 0)`,
		`string.gsub("hello", "l", 5)`,
		`string.gsub("hello", "l", function() error("inner") end)`,
		`string.gsub("a,b,,c", ",", ";", -1)`,
		`("x"):gsub("^", ">")`,
		`table.concat({1, "a", 2.5}, ", ")`,
		`table.concat({"a", "b", "c"}, "-", 2)`,
		`table.concat({"a", "b", "c"}, "-", 2, 3)`,
		`table.concat({"a", "b", "c"}, "-", 0, 9)`,
		`table.concat({"a", {}, "c"})`,
		`table.concat({})`,
		`table.concat({"a", "b"}, "", 5)`,
		`loadstring("return 1 + 2")()`,
		`loadstring("return +")`,
		`type(loadstring("error('x')", "chunk"))`,
		`pcall(loadstring("error('x')", "chunk"))`,
		`(function() local parts = {"return ", "40 + 2"} local i = 0 return load(function() i = i + 1 return parts[i] end)() end)()`,
		`(function() local parts = {"return ", "", "1"} local i = 0 return type(load(function() i = i + 1 return parts[i] end, "=name")) end)()`,
		`pcall(load(function() local done = false return function() if not done then done = true return "error('y')" end end end)(), "chunkname")`,
		`load(function() return {} end)`,
		`pcall(load(function() return nil end))`,
		`load(function() error("reader") end)`,
	}
	var gm strings.Builder
	gm.WriteString(`(function() local out = {} for k, v in string.gmatch("a=1, b=2", "(%w+)=(%w+)") do out[#out+1] = k .. v end return table.concat(out, ",") end)()`)
	exprs = append(exprs, gm.String())
	for _, c := range patternCases {
		q := strconv.Quote
		exprs = append(exprs,
			`string.find(`+q(c.s)+`, `+q(c.p)+`)`,
			`string.match(`+q(c.s)+`, `+q(c.p)+`)`,
			`string.gsub(`+q(c.s)+`, `+q(c.p)+`, "<%0>")`,
			`(function() local t = {} for a, b in string.gmatch(`+q(c.s)+`, `+q(c.p)+`) do t[#t+1] = tostring(a) .. "," .. tostring(b) end return table.concat(t, "|") end)()`)
	}
	eval := func(L *lua.LState, expr string) string {
		err := L.DoString(`local r = {pcall(function() return ` + expr + ` end)}
for i = 1, #r do r[i] = tostring(r[i]) end
result = table.concat(r, "|")`)
		if err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		return L.GetGlobal("result").String()
	}
	stock := lua.NewState()
	defer stock.Close()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.lua"), nil, 0o644)
	h := load(t, dir, Options{})
	p := h.set.Load().byName["p"]
	guarded, err := p.get()
	if err != nil {
		t.Fatal(err)
	}
	defer guarded.Close()
	for _, e := range exprs {
		want := eval(stock, e)
		if strings.Contains(want, "runtime error:") {
			continue // stock gopher-lua crashed (a Go panic): nothing to match
		}
		if got := eval(guarded, e); normalizePatternErrors(got) != normalizePatternErrors(want) {
			t.Errorf("%s = %q, stock gopher-lua gives %q", e, got, want)
		}
	}
}

// TestHandlersReplaced: a handler that replaces the handlers global fails
// later calls on that state with an error instead of a panic.
func TestHandlersReplaced(t *testing.T) {
	for _, repl := range []string{"nil", "5", `{}`} {
		t.Run(repl, func(t *testing.T) {
			dir := t.TempDir()
			src := `handlers = {["/x"] = function(req) handlers = ` + repl + ` return "ok" end}`
			if err := os.WriteFile(filepath.Join(dir, "p.lua"), []byte(src), 0o644); err != nil {
				t.Fatal(err)
			}
			h := load(t, dir, Options{MaxStates: 1})
			r := &server.PluginRequest{Plugin: "p", Method: "GET", Path: "/x"}
			if resp, found, err := h.ServePlugin(r); err != nil || !found || string(resp.Body) != "ok" {
				t.Fatalf("first call: %+v %v %v", resp, found, err)
			}
			var err error
			func() {
				defer func() {
					if v := recover(); v != nil {
						t.Fatalf("second call panicked: %v", v)
					}
				}()
				_, _, err = h.ServePlugin(r)
			}()
			if err == nil || !strings.Contains(err.Error(), "plugin p: handler /x failed") {
				t.Fatalf("second call: err = %v, want a plugin error", err)
			}
		})
	}
}

// TestLoadChunkLimit: gopher-lua compiles a chunk recursively, so a few MB
// of nested expressions from load or loadstring overflowed the Go stack (a
// fatal error that ends the process); such chunks are now refused with
// load's usual nil, message.
func TestLoadChunkLimit(t *testing.T) {
	for _, c := range []struct{ name, body string }{
		{"loadstring", `local f, err = loadstring("return " .. string.rep("not ", 4e6) .. "1")`},
		{"load", `local n = 0
local f, err = load(function()
  n = n + 1
  if n == 1 then return "return " elseif n <= 5 then return string.rep("not ", 1e6) elseif n == 6 then return "1" end
end)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := onRequestHost(t, c.body+"\nreturn {status = 400, message = tostring(f) .. \": \" .. tostring(err)}", Options{Timeout: 5 * time.Second})
			rej, err := h.FilterRequest(req("m", ""))
			if err != nil || rej == nil || rej.Message != "nil: chunk larger than 262144 bytes" {
				t.Fatalf("rej=%+v err=%v", rej, err)
			}
		})
	}
}

// TestPrintToLog: print goes to the server log, not the process's stdout.
func TestPrintToLog(t *testing.T) {
	var logBuf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logBuf, nil))
	h := onRequestHost(t, `print("hello", 42, nil, {} ~= nil)`, Options{Logger: logger})
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout := os.Stdout
	os.Stdout = w
	rej, callErr := h.FilterRequest(req("m", ""))
	os.Stdout = stdout
	w.Close()
	out, _ := io.ReadAll(r)
	if callErr != nil || rej != nil {
		t.Fatalf("rej=%+v err=%v", rej, callErr)
	}
	if len(out) != 0 {
		t.Errorf("the plugin wrote %q to stdout", out)
	}
	if !strings.Contains(logBuf.String(), `msg="plugin: hello\t42\tnil\ttrue" plugin=p`) {
		t.Errorf("log: %s", logBuf.String())
	}
}

// TestMemoryKVExpiredDropped: an expired key was deleted only when that
// same key was read again, so keys that are never read again (the quota
// plugin's "used/<day>/<key>" for yesterday, or for a key seen once) piled
// up for as long as the server ran.
func TestMemoryKVExpiredDropped(t *testing.T) {
	for _, c := range []struct {
		name  string
		write func(kv *MemoryKV, key string)
	}{
		{"set", func(kv *MemoryKV, key string) { kv.Set(key, "v", time.Millisecond) }},
		{"incr", func(kv *MemoryKV, key string) { kv.Incr(key, 1, time.Millisecond) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			kv := NewMemoryKV()
			kv.Set("keep", 1.0, 0)
			for round := range 20 {
				for i := range 1000 {
					c.write(kv, "r"+strconv.Itoa(round)+"/"+strconv.Itoa(i))
				}
				time.Sleep(2 * time.Millisecond) // this round's keys expire
			}
			kv.mu.Lock()
			n := len(kv.m)
			kv.mu.Unlock()
			if n > 5000 {
				t.Errorf("%d entries held after 20 rounds of 1000 keys that expired, want them dropped", n)
			}
			if v, ok := kv.Get("keep"); !ok || v != 1.0 {
				t.Errorf("keep = %v %v", v, ok)
			}
		})
	}
}

// TestJSONEncodeBounded: encoding a table runs in Go, outside the call's
// timeout; a table that holds the same subtable twice at each of 60 levels
// (60 Lua instructions) expanded to 2^60 leaves, hanging the server and
// growing its memory without end. Both json.encode and a handler's table
// body stop at maxJSONBytes.
func TestJSONEncodeBounded(t *testing.T) {
	dir := t.TempDir()
	src := `
local function dag() local t = {x = string.rep("0123456789", 1000)} for i = 1, 60 do t = {t, t, x = "0123456789"} end return t end
function on_request(r) json.encode(dag()) end
handlers = {["/dag"] = function(req) return {status = 200, body = dag()} end}
`
	if err := os.WriteFile(filepath.Join(dir, "p.lua"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	h := load(t, dir, Options{})
	for _, call := range []func() error{
		func() error { _, err := h.FilterRequest(req("m", "")); return err },
		func() error {
			_, _, err := h.ServePlugin(&server.PluginRequest{Plugin: "p", Method: "GET", Path: "/dag"})
			return err
		},
	} {
		done := make(chan error, 1)
		go func() { done <- call() }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "JSON text longer than") {
				t.Errorf("err = %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("still encoding after 20s")
		}
	}
}

// patternErrorRE matches the messages of malformed patterns, which read as
// Lua's in ours ("malformed pattern (missing ']')") and differently in
// gopher-lua's ("unexpected EOS at 1").
var patternErrorRE = regexp.MustCompile(`(unexpected EOS|unfinished capture|invalid '\)'|invalid capture index|invalid pattern capture|malformed pattern \([^)]*\))( at (\d+|EOS))?`)

// normalizePatternErrors makes pattern error messages comparable.
func normalizePatternErrors(s string) string {
	return patternErrorRE.ReplaceAllString(s, "<pattern error>")
}

// patternCases cover every pattern feature (luapattern's package comment)
// for the comparisons with stock gopher-lua.
var patternCases = []struct{ s, p string }{
	{"hello world", "o w"}, {"hello", "."}, {"a\nb\x00c", "."}, {"a\nb\x00c", ".+"},
	{"Hi there, 42!\t\x01", "%a+"}, {"Hi there, 42!\t\x01", "%A+"}, {"a\x01\x7f b", "%c"}, {"a\x01\x7f b", "%C+"},
	{"x 42 y", "%d+"}, {"x 42 y", "%D+"}, {"aBcD", "%l+"}, {"aBcD", "%L+"}, {"a.b,c!", "%p"}, {"a.b,c!", "%P+"},
	{"a \t\n\v\f\rb", "%s+"}, {"a \t\n\v\f\rb", "%S+"}, {"aBcD", "%u+"}, {"aBcD", "%U+"},
	{"ab_12 x", "%w+"}, {"ab_12 x", "%W+"}, {"0x1fG", "%x+"}, {"0x1fG", "%X+"}, {"a\x00b", "%z"}, {"a\x00b", "%Z+"},
	{"\x80\xc3\xa9a", "%a"}, {"\x80\xc3\xa9a", "%w+"}, {"a.b", "%."}, {"50%", "%%"}, {"a+b", "%+"}, {"[x]", "%[(.)%]"},
	{"a^b$c", "%^b%$"}, {"gfx", "%g"}, {"xfy", "%f"}, {"THE (quick) fox", "%f[%a]%a+"}, {"x", "%e"},
	{"hello", "[aeiou]"}, {"hello", "[^aeiou]+"}, {"a-z", "[a%-z]+"}, {"x-", "[a-]"}, {"]]", "[]]"}, {"a]", "[^]]"},
	{"key=val", "[%w_]+"}, {"0x1F", "[%dA-F]+"}, {"abc", "[b-a]"}, {"--/.", "[--/]+"}, {"%a", "[%%a]+"}, {"^x", "[%^x]+"}, {"^x", "[x^]+"},
	{"aaa", "a*"}, {"aaab", "a*b"}, {"b", "a*b"}, {"aaa", "a+"}, {"b", "a+"}, {"aaab", "a-b"}, {"aaa", "a-"}, {"aaa", "^a-$"},
	{"ab", "a?b"}, {"b", "a?b"}, {"aab", "a?a?a?b"}, {"<a><b>", "<(.-)>"}, {"<a><b>", "<(.*)>"}, {"a*", "a**"}, {"*a", "*"}, {"+", "+"},
	{"hello", "^h"}, {"hello", "^e"}, {"a^b", "a^b"}, {"hello", "o$"}, {"hello", "l$"}, {"a$b", "a$b"}, {"a$", "a$$"}, {"", "^$"}, {"x", "^$"},
	{"key = value", "(%w+)%s*=%s*(%w+)"}, {"abc", "((a)(b))"}, {"abc", "()b()"}, {"abc", "(()b())"}, {"hello", "()ll()"}, {"", "()"},
	{"a-c", "a(-)"}, {"abcabc", "(abc)%1"}, {"abab", "(a)(b)%2%1"}, {"aa", "()%1"}, {"xyyx", "(x)(y)%2%1"}, {"abcc", "(%w)%1"},
	{"f(a(b)c) (d)", "%b()"}, {"((a)", "%b()"}, {"[x][y]", "%b[]"}, {"xax", "%bxx"}, {"if a then b end", "%bie"},
	{"x(", "("}, {"x)", ")"}, {"(a", "(()"}, {"a", "%1"}, {"aa", "(a)%2"}, {"a", "%0"}, {"a", "[a"}, {"a", "[]"}, {"a", "[^]"}, {"a", "[%]"}, {"x", "x["},
	{"aaa", "^a"}, {"aaa", "^a*"}, {"abab", "^"}, {"abab", "b$"}, {"aab", "a*"}, {"hello", ""},
}

// knownDifference reports whether pattern p is one on which luapattern
// deliberately differs from stock gopher-lua (TestPatternDifferences).
func knownDifference(p string) bool {
	// A '%' at the end or a %b without its two bytes (stock: no match,
	// ours: Lua's error), a back-reference to a capture still open (stock:
	// matches, ours: Lua's error).
	var open []int
	ncap := 0
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '[':
			for j := i + 2; j < len(p); j++ {
				if p[j] == '%' {
					j++
				} else if p[j] == ']' {
					i = j
					break
				}
			}
		case '(':
			if i+1 < len(p) && p[i+1] == ')' {
				ncap++
				i++
				continue
			}
			open = append(open, ncap)
			ncap++
		case ')':
			if len(open) > 0 {
				open = open[:len(open)-1]
			}
		case '%':
			if i+1 == len(p) || (p[i+1] == 'b' && len(p)-(i+2) < 2) {
				return true
			}
			if d := int(p[i+1]) - '1'; d >= 0 && d < 9 && slices.Contains(open, d) {
				return true
			}
			i++
		}
	}
	// Sets where a '-' follows a class or a range, or ends a range
	// ("[%a-z]", "[a-c-e]", "[a--]"), or ends in a %: gopher-lua reads them otherwise
	// than the manual says.
	for i := 0; i < len(p); i++ {
		if p[i] == '%' {
			i++
			continue
		}
		if p[i] != '[' {
			continue
		}
		j := i + 1
		if j < len(p) && p[j] == '^' {
			j++
		}
		for first := true; j < len(p) && (first || p[j] != ']'); first = false {
			switch {
			case p[j] == '%' && j+1 < len(p):
				j += 2
			case j+2 < len(p) && p[j+1] == '-' && p[j+2] != ']':
				if p[j+2] == '-' || p[j+2] == '%' {
					return true
				}
				j += 3
			default:
				j++
				continue
			}
			if j+1 < len(p) && p[j] == '-' && p[j+1] != ']' {
				return true
			}
		}
		i = j
	}
	return false
}

// FuzzStringFunctions: the guarded string.find, match, gmatch and gsub give
// stock gopher-lua's results and errors (pattern errors compared by being
// errors: ours read as Lua's), except where knownDifference says.
func FuzzStringFunctions(f *testing.F) {
	f.Add("hello world", "o", "0")
	f.Add("key = value", "(%w+)%s*=%s*(%w+)", "%2=%1")
	f.Add("abc", "()b()", "%1%%%x%")
	f.Add("f(a(b)c)", "%b()", "")
	f.Add("aaa", "a-", "<%0>")
	f.Add("x", "[a", "")
	for _, c := range patternCases {
		f.Add(c.s, c.p, "%1-%0%%")
	}
	cmp := newStockComparer(f)
	f.Fuzz(func(t *testing.T, s, p, r string) {
		if len(s) > 64 || len(p) > 16 || len(r) > 16 {
			return // keep backtracking patterns short: stock matching cannot be stopped
		}
		switch got, want, outcome := cmp.compare(s, p, r); outcome {
		case outcomeDiffers:
			t.Fatalf("find/match/gsub/gmatch(%q, %q, %q):\n got %s\nwant %s", s, p, r, got, want)
		case outcomeKnown:
			t.Skip("a known difference")
		}
	})
}

// TestStringFunctionsRandom compares random patterns built from the
// pattern syntax's bytes on random subjects with stock gopher-lua.
func TestStringFunctionsRandom(t *testing.T) {
	cmp := newStockComparer(t)
	seed, _ := strconv.ParseUint(os.Getenv("PATTERN_SEED"), 10, 64) // another run: PATTERN_SEED=n
	rng := rand.New(rand.NewPCG(seed, 2))
	const patBytes = "ab.%%%()[]^$*+-?-1 2bxyadswlpuczADS"
	const subjBytes = "aab b()[]%-^$xy1 \x00z"
	n := 6000
	if testing.Short() {
		n = 300
	}
	counts := map[outcome]int{}
	for range n {
		var p []byte
		if rng.IntN(2) == 0 {
			p = make([]byte, rng.IntN(9))
			for i := range p {
				p[i] = patBytes[rng.IntN(len(patBytes))]
			}
		} else {
			p = randomPattern(rng)
		}
		s := make([]byte, rng.IntN(13))
		for i := range s {
			s[i] = subjBytes[rng.IntN(len(subjBytes))]
		}
		got, want, o := cmp.compare(string(s), string(p), "<%1>")
		counts[o]++
		if o == outcomeKnown && os.Getenv("SHOWKNOWN") != "" {
			t.Logf("known: %q %q\n got %s\nwant %s", s, p, got, want)
		}
		if o == outcomeDiffers {
			t.Errorf("find/match/gsub/gmatch(%q, %q, \"<%%1>\"):\n got %s\nwant %s", s, p, got, want)
		}
	}
	t.Logf("%d same, %d known differences, %d skipped (stock crashed or ours hit its limits)", counts[outcomeSame], counts[outcomeKnown], counts[outcomeSkipped])
}

// randomPattern builds a pattern from its syntax's items.
func randomPattern(rng *rand.Rand) []byte {
	pick := func(s string) byte { return s[rng.IntN(len(s))] }
	const lits = "ab -^$]xy"
	const classes = "acdlpsuwxzACDLPSUWXZ.%-]["
	var p []byte
	if rng.IntN(4) == 0 {
		p = append(p, '^')
	}
	open := 0
	for range rng.IntN(5) + 1 {
		switch rng.IntN(9) {
		case 0, 1:
			p = append(p, pick(lits))
		case 2:
			p = append(p, '.')
		case 3:
			p = append(p, '%', pick(classes))
		case 4:
			p = append(p, '[')
			if rng.IntN(3) == 0 {
				p = append(p, '^')
			}
			for range rng.IntN(4) + 1 {
				switch rng.IntN(4) {
				case 0:
					p = append(p, pick("ab-x]^"))
				case 1:
					p = append(p, pick("a-"), '-', pick("bz-"))
				default:
					p = append(p, '%', pick(classes))
				}
			}
			p = append(p, ']')
		case 5:
			if open > 0 && rng.IntN(2) == 0 {
				p = append(p, ')')
				open--
			} else if rng.IntN(3) == 0 {
				p = append(p, '(', ')')
			} else {
				p = append(p, '(')
				open++
			}
		case 6:
			p = append(p, '%', 'b', pick("(a["), pick(")b]"))
		case 7:
			p = append(p, '%', pick("123"))
		case 8:
			p = append(p, pick(lits), pick("*+-?"))
		}
		if rng.IntN(3) == 0 {
			p = append(p, pick("*+-?"))
		}
	}
	for ; open > 0; open-- {
		p = append(p, ')')
	}
	if rng.IntN(4) == 0 {
		p = append(p, '$')
	}
	return p
}

type outcome int

const (
	outcomeSame outcome = iota
	outcomeDiffers
	outcomeKnown   // knownDifference
	outcomeSkipped // stock crashed, or ours took too long for stock to be run
)

// stockComparer runs the string functions on a plugin state and on a
// plain lua.NewState.
type stockComparer struct {
	tb             testing.TB
	stock, guarded *lua.LState
	stockF, guardF *lua.LFunction
}

func newStockComparer(tb testing.TB) *stockComparer {
	c := &stockComparer{tb: tb, stock: lua.NewState()}
	tb.Cleanup(c.stock.Close)
	dir := tb.TempDir()
	os.WriteFile(filepath.Join(dir, "p.lua"), nil, 0o644)
	h, err := Load(dir, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	if c.guarded, err = h.set.Load().byName["p"].get(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.guarded.Close)
	const code = `local s, p, r = ...
local out = {}
local function add(...) local t = {pcall(...)} for i = 1, #t do out[#out + 1] = tostring(t[i]) end out[#out + 1] = ";" end
add(string.find, s, p)
add(string.find, s, p, 2)
add(string.match, s, p)
add(string.match, s, p, -2)
add(string.gsub, s, p, r)
add(string.gsub, s, p, r, 1)
add(string.gsub, s, p, {a = r, [1] = "one"})
add(string.gsub, s, p, function(a, b) if a == "" then return nil end return (b or "") .. r end)
add(function() local t = {} for a, b in string.gmatch(s, p) do t[#t + 1] = tostring(a) .. "," .. tostring(b) end return table.concat(t, "|") end)
add(function() local it, st = string.gmatch(s, p) local t = {} for i = 1, #s + 2 do t[i] = select("#", it(st)) if t[i] == 0 then break end end return table.concat(t, ",") end)
add(string.find, s, p, 0)
add(string.find, s, p, -1)
add(string.find, s, p, #s + 1)
add(string.find, s, p, #s + 2)
add(string.match, s, p, #s)
add(string.gsub, s, p, {[1] = r, [2] = false})
add(string.gsub, s, p, "%0", -1)
return table.concat(out, " ")`
	if c.stockF, err = c.stock.LoadString(code); err != nil {
		tb.Fatal(err)
	}
	if c.guardF, err = c.guarded.LoadString(code); err != nil {
		tb.Fatal(err)
	}
	return c
}

func (c *stockComparer) run(L *lua.LState, fn *lua.LFunction, s, p, r string) string {
	if err := L.CallByParam(lua.P{Fn: fn, NRet: 1, Protect: true}, lua.LString(s), lua.LString(p), lua.LString(r)); err != nil {
		return "error: " + err.Error()
	}
	v := L.Get(-1)
	L.Pop(1)
	return v.String()
}

// compare runs ours first, with a deadline, and stock only if ours
// finished: stock matching cannot be stopped.
func (c *stockComparer) compare(s, p, r string) (got, want string, o outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	c.guarded.SetContext(ctx)
	got = c.run(c.guarded, c.guardF, s, p, r)
	c.guarded.RemoveContext()
	cancel()
	if strings.Contains(got, "context deadline exceeded") || strings.Contains(got, "pattern too complex") {
		return got, "", outcomeSkipped
	}
	want = c.run(c.stock, c.stockF, s, p, r)
	switch {
	case normalizePatternErrors(got) == normalizePatternErrors(want):
		return got, want, outcomeSame
	case strings.Contains(want, "runtime error:"):
		return got, want, outcomeSkipped
	case knownDifference(p):
		return got, want, outcomeKnown
	}
	return got, want, outcomeDiffers
}

// TestOneInstructionRunaways: single Lua instructions or library calls
// that the per-instruction deadline check cannot split. The registry grew
// 32 slots at a time, copying itself each time (quadratic: string.byte of
// a 10 MB string or unpack of 1e8 values ran for 10–20 s before "registry
// overflow"); t[67108863] = 1 filled an array part with 67M nils (a GB, and
// half a minute here) in one instruction.
func TestOneInstructionRunaways(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"string.byte", `local s = string.rep("x", 1e7) local n = select("#", string.byte(s, 1, -1))`, "registry overflow"},
		{"unpack", `local n = select("#", unpack({}, 1, 1e8))`, "registry overflow"},
		{"sparse index", `local t = {} t[67108863] = 1 t[67108862] = 2
return {status = 400, message = t[67108863] .. t[67108862] .. #{1, 2, 3}}`, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := onRequestHost(t, c.body, Options{Timeout: 500 * time.Millisecond})
			start := time.Now()
			rej, err := h.FilterRequest(req("m", ""))
			d := time.Since(start)
			if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
				t.Errorf("rej=%+v err=%v, want an error holding %q", rej, err, c.want)
			}
			if c.want == "" && (err != nil || rej == nil || rej.Message != "123") {
				t.Errorf("rej=%+v err=%v", rej, err)
			}
			if d > 3*time.Second {
				t.Errorf("took %s (timeout 500ms)", d)
			}
		})
	}
}

// TestPatternDifferences pins where the string functions deliberately
// differ from stock gopher-lua (whose results are in the comments): Lua
// 5.1's behaviour where gopher-lua's is a quirk. Pattern error messages
// also read as Lua's ("malformed pattern (missing ']')", not "unexpected
// EOS at 1").
func TestPatternDifferences(t *testing.T) {
	exprs := []struct{ expr, want string }{
		// stock: no match, no error
		{`string.find("a%", "a%")`, "false|<string>:1: malformed pattern (ends with '%')"},
		{`string.find("ab", "%ba")`, "false|<string>:1: malformed pattern (missing arguments to '%b')"},
		{`string.find("x", "y%")`, "true|nil"}, // not reached: no error, as in Lua
		// stock: matches, %1 as empty
		{`string.match("aa", "((a)%1)")`, "false|<string>:1: invalid capture index"},
		// stock: no match at all for these sets
		{`string.match("x-z", "[%a-z]+")`, "true|x-z"},
		{`string.match("b-e", "[a-c-e]+")`, "true|b-e"},
		{`string.match("a", "[^a--]")`, "true|a"},
		// stock: "LhLeLlLlLoL", 6 (a limit of 0 ignored for empty matches)
		{`string.gsub("hello", "", "L", 0)`, "true|hello|0"},
		// stock: a Go runtime error (slice bounds out of range)
		{`string.gsub("aa", "()%1", "<%0>")`, "true|<>a<>a<>|3"},
		// stock: the iterator and a userdata state
		{`select("#", string.gmatch("a", "a"))`, "true|1"},
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "p.lua"), nil, 0o644)
	h := load(t, dir, Options{})
	L, err := h.set.Load().byName["p"].get()
	if err != nil {
		t.Fatal(err)
	}
	defer L.Close()
	for _, e := range exprs {
		err := L.DoString(`local r = {pcall(function() return ` + e.expr + ` end)}
for i = 1, math.max(#r, 2) do r[i] = tostring(r[i]) end
result = table.concat(r, "|")`)
		if err != nil {
			t.Fatalf("%s: %v", e.expr, err)
		}
		if got := L.GetGlobal("result").String(); got != e.want {
			t.Errorf("%s = %q, want %q", e.expr, got, e.want)
		}
	}
}
