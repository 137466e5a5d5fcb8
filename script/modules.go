package script

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	starjson "go.starlark.net/lib/json"
	starmath "go.starlark.net/lib/math"
	startime "go.starlark.net/lib/time"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
)

// predeclared are the names every script sees besides the Starlark
// builtins. None gives file or network access.
var predeclared = starlark.StringDict{
	"json":   jsonModule,
	"re":     reModule,
	"math":   starmath.Module,
	"time":   startime.Module,
	"log":    logModule,
	"struct": starlark.NewBuiltin("struct", starlarkstruct.Make),
}

// jsonModule is Starlark's json plus json.raw(text): a JSON text embedded
// compacted but otherwise verbatim where the server encodes a value (tool-call arguments), so that
// numbers keep the form the model wrote.
var jsonModule = func() *starlarkstruct.Module {
	m := &starlarkstruct.Module{Name: "json", Members: starlark.StringDict{}}
	for k, v := range starjson.Module.Members {
		m.Members[k] = v
	}
	m.Members["decode"] = starlark.NewBuiltin("json.decode", jsonDecode)
	m.Members["encode"] = starlark.NewBuiltin("json.encode", jsonEncode)
	m.Members["raw"] = starlark.NewBuiltin("json.raw", func(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		var s string
		if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 1, &s); err != nil {
			return nil, err
		}
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(s)); err != nil {
			return nil, fmt.Errorf("json.raw: %q is not valid JSON", s)
		}
		return rawJSON(buf.String()), nil
	})
	m.Freeze()
	return m
}()

// maxJSONDecodeDepth bounds the nesting json.decode accepts (as
// encoding/json's does): go.starlark.net's decoder recurses once per level,
// and a few MB of "[" (a model's reply, say) would overflow the Go stack,
// a fatal error that ends the process.
const maxJSONDecodeDepth = 10000

// jsonDecode is go.starlark.net's json.decode(x, default) with the nesting
// limit: deeper text is invalid JSON, giving default when there is one.
func jsonDecode(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 0 {
		if s, ok := args[0].(starlark.String); ok && jsonTooDeep(string(s), maxJSONDecodeDepth) {
			var x, d starlark.Value
			if err := starlark.UnpackArgs(b.Name(), args, kw, "x", &x, "default?", &d); err != nil {
				return nil, err
			}
			if d != nil {
				return d, nil
			}
			return nil, fmt.Errorf("json.decode: nested deeper than %d", maxJSONDecodeDepth)
		}
	}
	return starjson.Module.Members["decode"].(*starlark.Builtin).CallInternal(th, args, kw)
}

// jsonTooDeep reports whether s opens more than max arrays or objects at
// once, brackets inside string literals aside.
func jsonTooDeep(s string, max int) bool {
	depth, inString := 0, false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			if depth++; depth > max {
				return true
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return false
}

// jsonEncode is go.starlark.net's json.encode(x), refusing a value whose
// text would be longer than maxJSONBytes before encoding it: the encoder
// is one uninterruptible step however much it writes, and range(1 << 30)
// or a list holding one sublist twice at each of 60 levels is one step to
// make.
func jsonEncode(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	if len(args) == 1 && len(kw) == 0 {
		w := jsonWalk{left: maxJSONBytes}
		if !w.walk(args[0]) {
			return nil, fmt.Errorf("json.encode: JSON text longer than %d bytes", maxJSONBytes)
		}
	}
	return starjson.Module.Members["encode"].(*starlark.Builtin).CallInternal(th, args, kw)
}

// jsonWalk visits a value as go.starlark.net's encoder does, counting the
// least text each value takes (2 bytes: a scalar and its comma, a list's
// brackets; a string's length and quotes) until left runs out. A cycle
// ends the walk there (the encoder reports it).
type jsonWalk struct {
	left int
	path []unsafe.Pointer
}

func (w *jsonWalk) walk(x starlark.Value) bool {
	if w.left -= 2; w.left < 0 {
		return false
	}
	if ptr := valuePointer(x); ptr != nil {
		if slices.Contains(w.path, ptr) {
			return true
		}
		w.path = append(w.path, ptr)
		defer func() { w.path = w.path[:len(w.path)-1] }()
	}
	switch x := x.(type) {
	case json.Marshaler, starlark.NoneType, starlark.Bool, starlark.Int, starlark.Float:
	case starlark.String:
		w.left -= len(x)
	case starlark.IterableMapping:
		for _, it := range x.Items() {
			if !w.walk(it[0]) || !w.walk(it[1]) {
				return false
			}
		}
	case starlark.Iterable:
		iter := x.Iterate()
		defer iter.Done()
		var elem starlark.Value
		for iter.Next(&elem) {
			if !w.walk(elem) {
				return false
			}
		}
	case starlark.HasAttrs:
		for _, name := range x.AttrNames() {
			if v, err := x.Attr(name); err == nil && v != nil && !w.walk(v) {
				return false
			}
		}
	}
	return w.left >= 0
}

// valuePointer is the identity the encoder uses to find cycles.
func valuePointer(x any) unsafe.Pointer {
	v := reflect.ValueOf(x)
	switch v.Kind() {
	case reflect.Ptr, reflect.Chan, reflect.Map, reflect.UnsafePointer, reflect.Slice:
		return v.UnsafePointer()
	}
	return nil
}

// rawJSON is a JSON text the encoder copies as it is.
type rawJSON string

func (r rawJSON) String() string        { return "json.raw(" + starlark.String(r).String() + ")" }
func (r rawJSON) Type() string          { return "json.raw" }
func (r rawJSON) Freeze()               {}
func (r rawJSON) Truth() starlark.Bool  { return true }
func (r rawJSON) Hash() (uint32, error) { return starlark.String(r).Hash() }

// clockKey holds the call's fixed time for time.now().
func setClock(th *starlark.Thread, t time.Time) {
	startime.SetNow(th, func() (time.Time, error) { return t, nil })
}

// reModule offers Go's RE2 regular expressions (linear time: no script can
// make one run away): match, search, findall, sub, split.
var reModule = &starlarkstruct.Module{Name: "re", Members: starlark.StringDict{
	"match":   starlark.NewBuiltin("re.match", reMatch),
	"search":  starlark.NewBuiltin("re.search", reSearch),
	"findall": starlark.NewBuiltin("re.findall", reFindall),
	"sub":     starlark.NewBuiltin("re.sub", reSub),
	"split":   starlark.NewBuiltin("re.split", reSplit),
}}

var (
	reCache    sync.Map // pattern → *regexp.Regexp
	reCacheLen atomic.Int64
)

// maxReCache bounds reCache: scripts may build patterns from request
// fields, and a cache keeping every one would grow without end. When full
// it starts afresh.
const maxReCache = 1024

func compileRe(pattern string) (*regexp.Regexp, error) {
	if r, ok := reCache.Load(pattern); ok {
		return r.(*regexp.Regexp), nil
	}
	r, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	if _, loaded := reCache.LoadOrStore(pattern, r); !loaded && reCacheLen.Add(1) > maxReCache {
		reCache.Clear()
		reCacheLen.Store(0)
	}
	return r, nil
}

func reArgs(b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (*regexp.Regexp, string, error) {
	var pat, s string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 2, &pat, &s); err != nil {
		return nil, "", err
	}
	r, err := compileRe(pat)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %v", b.Name(), err)
	}
	return r, s, nil
}

// groups is the whole match and its groups as a tuple (None for a group
// that did not take part).
func groups(s string, loc []int) starlark.Value {
	if loc == nil {
		return starlark.None
	}
	t := make(starlark.Tuple, len(loc)/2)
	for i := range t {
		if loc[2*i] < 0 {
			t[i] = starlark.None
		} else {
			t[i] = starlark.String(s[loc[2*i]:loc[2*i+1]])
		}
	}
	return t
}

// re.match(pattern, s): the groups of a match at the start of s, or None.
func reMatch(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	r, s, err := reArgs(b, args, kw)
	if err != nil {
		return nil, err
	}
	loc := r.FindStringSubmatchIndex(s)
	if loc == nil || loc[0] != 0 {
		return starlark.None, nil
	}
	return groups(s, loc), nil
}

// re.search(pattern, s): (start, end, groups) of the first match, or None.
func reSearch(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	r, s, err := reArgs(b, args, kw)
	if err != nil {
		return nil, err
	}
	loc := r.FindStringSubmatchIndex(s)
	if loc == nil {
		return starlark.None, nil
	}
	return starlark.Tuple{starlark.MakeInt(loc[0]), starlark.MakeInt(loc[1]), groups(s, loc)}, nil
}

// re.findall(pattern, s): every match's groups tuple.
func reFindall(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	r, s, err := reArgs(b, args, kw)
	if err != nil {
		return nil, err
	}
	var out []starlark.Value
	for _, loc := range r.FindAllStringSubmatchIndex(s, -1) {
		out = append(out, groups(s, loc))
	}
	return starlark.NewList(out), nil
}

// re.sub(pattern, repl, s): repl uses Go's $1 syntax.
func reSub(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	var pat, repl, s string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, kw, 3, &pat, &repl, &s); err != nil {
		return nil, err
	}
	r, err := compileRe(pat)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", b.Name(), err)
	}
	return reReplace(r, repl, s)
}

// maxReSubGrowth bounds how much longer than s re.sub's result may be:
// re.sub("", "x" * (1 << 20), "y" * (1 << 20)) is one step that would
// otherwise build a terabyte.
const maxReSubGrowth = 16 << 20

// reReplace is r.ReplaceAllString(s, repl) within maxReSubGrowth.
func reReplace(r *regexp.Regexp, repl, s string) (starlark.Value, error) {
	ms := r.FindAllStringSubmatchIndex(s, -1)
	if ms == nil {
		return starlark.String(s), nil
	}
	var out []byte
	last := 0
	for _, m := range ms {
		out = append(out, s[last:m[0]]...)
		out = r.ExpandString(out, repl, s, m)
		last = m[1]
		if len(out) > len(s)+maxReSubGrowth {
			return nil, fmt.Errorf("re.sub: the result would exceed %d bytes", len(s)+maxReSubGrowth)
		}
	}
	return starlark.String(append(out, s[last:]...)), nil
}

func reSplit(_ *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
	r, s, err := reArgs(b, args, kw)
	if err != nil {
		return nil, err
	}
	parts := r.Split(s, -1)
	out := make([]starlark.Value, len(parts))
	for i, p := range parts {
		out[i] = starlark.String(p)
	}
	return starlark.NewList(out), nil
}

// loggerKey is the thread-local slot of the engine's logger.
const loggerKey = "infernix.logger"

// logModule writes to the server log: log.debug/info/warn/error(msg, **attrs).
var logModule = &starlarkstruct.Module{Name: "log", Members: starlark.StringDict{
	"debug": logFn("log.debug", slog.LevelDebug),
	"info":  logFn("log.info", slog.LevelInfo),
	"warn":  logFn("log.warn", slog.LevelWarn),
	"error": logFn("log.error", slog.LevelError),
}}

func logFn(name string, level slog.Level) *starlark.Builtin {
	return starlark.NewBuiltin(name, func(th *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kw []starlark.Tuple) (starlark.Value, error) {
		if len(args) != 1 {
			return nil, fmt.Errorf("%s: want one message argument", name)
		}
		msg, ok := starlark.AsString(args[0])
		if !ok {
			msg = args[0].String()
		}
		attrs := []any{"thread", th.Name}
		for _, kv := range kw {
			k, _ := starlark.AsString(kv[0])
			v, ok := starlark.AsString(kv[1])
			if !ok {
				v = kv[1].String()
			}
			attrs = append(attrs, k, v)
		}
		if l, ok := th.Local(loggerKey).(*slog.Logger); ok {
			l.Log(context.Background(), level, "script: "+msg, attrs...)
		}
		return starlark.None, nil
	})
}
