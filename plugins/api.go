package plugins

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"

	"github.com/infernix/infernix/server"
)

// compile parses a plugin once; every pooled state runs the same proto.
func compile(src, name string) (*lua.FunctionProto, error) {
	chunk, err := parse.Parse(strings.NewReader(src), name)
	if err != nil {
		return nil, err
	}
	return lua.Compile(chunk, name)
}

// KV is the store behind the kv module. Values are strings or numbers
// (float64). Implementations must be safe for concurrent use.
type KV interface {
	Get(key string) (any, bool)
	Set(key string, v any, ttl time.Duration)
	// Incr adds n to a number (missing or expired: 0) and returns the sum.
	Incr(key string, n float64, ttl time.Duration) float64
	Delete(key string)
}

// MemoryKV is an in-memory KV with optional expiry.
type MemoryKV struct {
	mu sync.Mutex
	m  map[string]kvEntry
	// sweepAt is the size at which a write next drops every expired
	// entry (keys that are never read again would stay forever).
	sweepAt int
}

// minSweep is the smallest sweepAt: small stores are not swept.
const minSweep = 1024

// sweep drops expired entries once the map has doubled since the last
// sweep (amortised O(1) a write).
func (k *MemoryKV) sweep(now time.Time) {
	if len(k.m) < max(k.sweepAt, minSweep) {
		return
	}
	for key, e := range k.m {
		if !e.expires.IsZero() && now.After(e.expires) {
			delete(k.m, key)
		}
	}
	k.sweepAt = 2 * len(k.m)
}

type kvEntry struct {
	v       any
	expires time.Time // zero: never
}

// NewMemoryKV returns an empty store.
func NewMemoryKV() *MemoryKV { return &MemoryKV{m: map[string]kvEntry{}} }

func (k *MemoryKV) live(key string, now time.Time) (kvEntry, bool) {
	e, ok := k.m[key]
	if ok && !e.expires.IsZero() && now.After(e.expires) {
		delete(k.m, key)
		return kvEntry{}, false
	}
	return e, ok
}

func (k *MemoryKV) Get(key string) (any, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	e, ok := k.live(key, time.Now())
	return e.v, ok
}

func (k *MemoryKV) Set(key string, v any, ttl time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	e := kvEntry{v: v}
	if ttl > 0 {
		e.expires = now.Add(ttl)
	}
	k.m[key] = e
	k.sweep(now)
}

func (k *MemoryKV) Incr(key string, n float64, ttl time.Duration) float64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := time.Now()
	e, ok := k.live(key, now)
	cur, _ := e.v.(float64)
	if !ok && ttl > 0 {
		e.expires = now.Add(ttl)
	}
	e.v = cur + n
	k.m[key] = e
	k.sweep(now)
	return cur + n
}

func (k *MemoryKV) Delete(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, key)
}

// openAPI installs log, time, json and kv (kv keys are namespaced by the
// plugin's name).
func (p *plugin) openAPI(L *lua.LState) {
	logT := L.NewTable()
	for name, lv := range map[string]func(string, ...any){"debug": p.h.log.Debug, "info": p.h.log.Info, "warn": p.h.log.Warn, "error": p.h.log.Error} {
		lv := lv
		logT.RawSetString(name, L.NewFunction(func(L *lua.LState) int {
			lv("plugin: "+L.CheckString(1), "plugin", p.name)
			return 0
		}))
	}
	L.SetGlobal("log", logT)
	L.SetGlobal("write_line", L.NewFunction(func(L *lua.LState) int {
		if err := p.h.writeLine(p.name, L.CheckString(1)); err != nil {
			L.RaiseError("write_line: %v", err)
		}
		return 0
	}))

	timeT := L.NewTable()
	timeT.RawSetString("now", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LNumber(float64(time.Now().UnixNano()) / 1e9))
		return 1
	}))
	timeT.RawSetString("date", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LString(time.Now().UTC().Format("2006-01-02")))
		return 1
	}))
	L.SetGlobal("time", timeT)

	jsonT := L.NewTable()
	jsonT.RawSetString("encode", L.NewFunction(func(L *lua.LState) int {
		b, err := encodeJSON(L.CheckAny(1))
		if err != nil {
			L.RaiseError("json.encode: %v", err)
		}
		L.Push(lua.LString(b))
		return 1
	}))
	jsonT.RawSetString("decode", L.NewFunction(func(L *lua.LState) int {
		var x any
		if err := json.Unmarshal([]byte(L.CheckString(1)), &x); err != nil {
			L.RaiseError("json.decode: %v", err)
		}
		L.Push(fromGo(L, x))
		return 1
	}))
	L.SetGlobal("json", jsonT)

	kv := p.h.opts.KV
	ns := p.name + "/"
	ttlArg := func(L *lua.LState, i int) time.Duration {
		return time.Duration(float64(L.OptNumber(i, 0)) * float64(time.Second))
	}
	kvT := L.NewTable()
	kvT.RawSetString("get", L.NewFunction(func(L *lua.LState) int {
		v, ok := kv.Get(ns + L.CheckString(1))
		switch v := v.(type) {
		case float64:
			L.Push(lua.LNumber(v))
		case string:
			L.Push(lua.LString(v))
		default:
			_ = ok
			L.Push(lua.LNil)
		}
		return 1
	}))
	kvT.RawSetString("set", L.NewFunction(func(L *lua.LState) int {
		key := ns + L.CheckString(1)
		switch v := L.CheckAny(2).(type) {
		case lua.LNumber:
			kv.Set(key, float64(v), ttlArg(L, 3))
		case lua.LString:
			kv.Set(key, string(v), ttlArg(L, 3))
		case *lua.LNilType:
			kv.Delete(key)
		default:
			L.ArgError(2, "kv values are strings or numbers")
		}
		return 0
	}))
	kvT.RawSetString("incr", L.NewFunction(func(L *lua.LState) int {
		L.Push(lua.LNumber(kv.Incr(ns+L.CheckString(1), float64(L.OptNumber(2, 1)), ttlArg(L, 3))))
		return 1
	}))
	kvT.RawSetString("delete", L.NewFunction(func(L *lua.LState) int {
		kv.Delete(ns + L.CheckString(1))
		return 0
	}))
	L.SetGlobal("kv", kvT)
}

// requestTable is a fresh copy of the request for one call (a plugin that
// changes it changes only its copy).
func requestTable(L *lua.LState, r *server.HookRequest) *lua.LTable {
	t := L.CreateTable(0, 14)
	t.RawSetString("endpoint", lua.LString(r.Endpoint))
	t.RawSetString("model", lua.LString(r.Model))
	t.RawSetString("served_model", lua.LString(r.ServedModel))
	t.RawSetString("api_key", lua.LString(r.APIKey))
	t.RawSetString("user", lua.LString(r.User))
	t.RawSetString("stream", lua.LBool(r.Stream))
	if r.MaxTokens >= 0 {
		t.RawSetString("max_tokens", lua.LNumber(r.MaxTokens))
	}
	if r.ReasoningEffort != "" {
		t.RawSetString("reasoning_effort", lua.LString(r.ReasoningEffort))
	}
	if r.ThinkingBudget >= 0 {
		t.RawSetString("thinking_budget", lua.LNumber(r.ThinkingBudget))
	}
	tools := L.CreateTable(len(r.Tools), 0)
	for _, name := range r.Tools {
		tools.Append(lua.LString(name))
	}
	t.RawSetString("tools", tools)
	msgs := L.CreateTable(len(r.Messages), 0)
	for _, m := range r.Messages {
		mt := L.CreateTable(0, 2)
		mt.RawSetString("role", lua.LString(m.Role))
		mt.RawSetString("content", lua.LString(m.Content))
		msgs.Append(mt)
	}
	t.RawSetString("messages", msgs)
	return t
}

func responseTable(L *lua.LState, r *server.HookResponse) *lua.LTable {
	t := L.CreateTable(0, 5)
	t.RawSetString("content", lua.LString(r.Content))
	t.RawSetString("reasoning", lua.LString(r.Reasoning))
	t.RawSetString("finish_reason", lua.LString(r.Finish))
	calls := L.CreateTable(len(r.ToolCalls), 0)
	for _, c := range r.ToolCalls {
		ct := L.CreateTable(0, 2)
		ct.RawSetString("name", lua.LString(c.Name))
		ct.RawSetString("arguments", lua.LString(c.Arguments))
		calls.Append(ct)
	}
	t.RawSetString("tool_calls", calls)
	tags := L.CreateTable(0, len(r.Tags))
	for k, v := range r.Tags {
		tags.RawSetString(k, lua.LString(v))
	}
	t.RawSetString("tags", tags)
	return t
}

func usageTable(L *lua.LState, r *server.HookResponse) *lua.LTable {
	t := L.CreateTable(0, 3)
	t.RawSetString("prompt_tokens", lua.LNumber(r.PromptTokens))
	t.RawSetString("completion_tokens", lua.LNumber(r.CompletionTokens))
	t.RawSetString("total_tokens", lua.LNumber(r.PromptTokens+r.CompletionTokens))
	return t
}

// fromGo converts a decoded JSON value to Lua.
func fromGo(L *lua.LState, x any) lua.LValue {
	switch x := x.(type) {
	case bool:
		return lua.LBool(x)
	case float64:
		return lua.LNumber(x)
	case string:
		return lua.LString(x)
	case []any:
		t := L.CreateTable(len(x), 0)
		for _, v := range x {
			t.Append(fromGo(L, v))
		}
		return t
	case map[string]any:
		t := L.CreateTable(0, len(x))
		for k, v := range x {
			t.RawSetString(k, fromGo(L, v))
		}
		return t
	}
	return lua.LNil
}

// encodeJSON encodes a Lua value: a table with only keys 1..n is an array
// (an empty table is {}), other tables objects with sorted keys.
func encodeJSON(v lua.LValue) ([]byte, error) {
	return appendJSON(nil, v, 0)
}

// maxJSONBytes bounds an encoded table: encoding runs in Go, outside the
// call's timeout, and a table holding one subtable twice at each of 60
// levels would expand to 2^60 values.
const maxJSONBytes = maxStringBytes

func appendJSON(b []byte, v lua.LValue, depth int) ([]byte, error) {
	if depth > 64 {
		return nil, fmt.Errorf("nested deeper than 64")
	}
	if len(b) > maxJSONBytes {
		return nil, fmt.Errorf("JSON text longer than %d bytes", maxJSONBytes)
	}
	switch v := v.(type) {
	case *lua.LNilType:
		return append(b, "null"...), nil
	case lua.LBool:
		if v {
			return append(b, "true"...), nil
		}
		return append(b, "false"...), nil
	case lua.LNumber:
		f := float64(v)
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return nil, fmt.Errorf("cannot encode %v", f)
		}
		out, _ := json.Marshal(f)
		return append(b, out...), nil
	case lua.LString:
		out, _ := json.Marshal(string(v))
		return append(b, out...), nil
	case *lua.LTable:
		n := v.Len()
		count := 0
		v.ForEach(func(lua.LValue, lua.LValue) { count++ })
		if n > 0 && n == count {
			b = append(b, '[')
			for i := 1; i <= n; i++ {
				if i > 1 {
					b = append(b, ',')
				}
				var err error
				if b, err = appendJSON(b, v.RawGetInt(i), depth+1); err != nil {
					return nil, err
				}
			}
			return append(b, ']'), nil
		}
		var keys []string
		var bad error
		v.ForEach(func(k, _ lua.LValue) {
			if k.Type() != lua.LTString && k.Type() != lua.LTNumber {
				bad = fmt.Errorf("a table key of type %s", k.Type())
			}
			keys = append(keys, k.String())
		})
		if bad != nil {
			return nil, bad
		}
		sort.Strings(keys)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			kb, _ := json.Marshal(k)
			b = append(append(b, kb...), ':')
			val := v.RawGetString(k)
			if val == lua.LNil {
				if f, err := parseNum(k); err == nil {
					val = v.RawGet(lua.LNumber(f))
				}
			}
			var err error
			if b, err = appendJSON(b, val, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	}
	return nil, fmt.Errorf("cannot encode a %s", v.Type())
}

func parseNum(s string) (float64, error) {
	var f float64
	_, err := fmt.Sscan(s, &f)
	return f, err
}
