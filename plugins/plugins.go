// Package plugins runs Lua plugins (gopher-lua) inside the server. Every
// *.lua file directly in the plugins directory is one plugin, named after
// the file; it defines any of these globals (see docs/scripting.md):
//
//	on_request(request)                  -> nil, or {status=429, message="…"} to reject
//	on_complete(request, response, usage)
//	on_tick(seconds)                     -- every tick, with the seconds since the last
//	handlers = { ["GET /stats"] = function(req) return {status=200, body="…"} end }
//
// HTTP handlers answer under /plugins/<name>/<path>.
//
// Sandbox: each call runs on a Lua state taken from the plugin's pool (one
// per concurrent caller), opened with only the base (without dofile and
// loadfile), table, string and math libraries plus log, time, json and kv;
// a per-call timeout through the state's context; bounded call stack and
// registry. Library functions whose Go code the timeout cannot stop are
// bounded too (sandbox.go): pattern matching polls the deadline,
// string.rep, table.concat, string.gsub and JSON encoding have size
// limits, load and loadstring a chunk size limit, and print goes to the
// log. State that must outlive a call, or be shared between the pooled
// states, lives in kv (a key-value store shared by the plugin's states).
// A plugin error is returned (and logged with its traceback), never a
// crash. Reload (SIGHUP or a changed file, see Watch) swaps in a new load
// of the directory, keeping the previous one when it fails.
//
// *Host implements server.RequestFilter, server.CompletionObserver and
// server.PluginHTTP.
package plugins

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"

	"github.com/infernix/infernix/internal/dirwatch"
	"github.com/infernix/infernix/server"
)

// Options tune the sandbox.
type Options struct {
	// Timeout bounds one call (default 1s).
	Timeout time.Duration
	// MaxStates bounds the idle states kept per plugin (default 16).
	MaxStates int
	// KV is the store behind the kv module (default: in memory).
	KV KV
	// Logger receives the plugins' log lines and errors.
	Logger *slog.Logger
	// LineFile is the file the plugins' write_line(text) appends to (the
	// operator chooses it; plugins never name files). "": write_line logs.
	LineFile string
}

// Host is the loaded plugins. It is safe for concurrent use.
type Host struct {
	opts Options
	log  *slog.Logger
	dir  string
	set  atomic.Pointer[pluginSet]
	mu   sync.Mutex // serialises reloads
	sig  string     // the .lua files and mtimes at the last load attempt

	lineMu sync.Mutex
	lines  *os.File
}

// Close closes the line file.
func (h *Host) Close() error {
	if h.lines != nil {
		return h.lines.Close()
	}
	return nil
}

// writeLine appends one line to the line file.
func (h *Host) writeLine(plugin, text string) error {
	text = strings.ReplaceAll(text, "\n", " ")
	if h.lines == nil {
		h.log.Info("plugin line", "plugin", plugin, "line", text)
		return nil
	}
	h.lineMu.Lock()
	defer h.lineMu.Unlock()
	_, err := h.lines.WriteString(text + "\n")
	return err
}

// plugin is one file and its pool of states.
type plugin struct {
	name, path string
	src        *lua.FunctionProto
	pool       chan *lua.LState
	h          *Host
	// Which handlers the file defines (read from the first state).
	onRequest, onComplete, onTick bool
	routes                        map[string]bool // "GET /x" or "/x"
}

// Load compiles every *.lua file directly in dir and runs each once to
// learn its handlers. A plugin that fails to load fails Load, naming it.
func Load(dir string, opts Options) (*Host, error) {
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	if opts.MaxStates <= 0 {
		opts.MaxStates = 16
	}
	if opts.KV == nil {
		opts.KV = NewMemoryKV()
	}
	h := &Host{opts: opts, log: opts.Logger, dir: dir}
	if h.log == nil {
		h.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.LineFile != "" {
		f, err := os.OpenFile(opts.LineFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("plugins: %w", err)
		}
		h.lines = f
	}
	h.sig = h.signature()
	set, err := h.loadAll()
	if err != nil {
		h.Close()
		return nil, err
	}
	h.set.Store(set)
	return h, nil
}

// pluginSet is one load of the directory.
type pluginSet struct {
	plugins []*plugin
	byName  map[string]*plugin
}

func (h *Host) loadAll() (*pluginSet, error) {
	if _, err := os.Stat(h.dir); err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	files, err := filepath.Glob(filepath.Join(h.dir, "*.lua"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	set := &pluginSet{byName: map[string]*plugin{}}
	for _, f := range files {
		p, err := h.loadPlugin(f)
		if err != nil {
			return nil, err
		}
		set.plugins = append(set.plugins, p)
		set.byName[p.name] = p
	}
	return set, nil
}

// Reload loads the directory again; on failure the previous plugins stay
// active and the error is logged and returned. Plugin state in kv is kept;
// Lua globals start afresh.
func (h *Host) Reload() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sig = h.signature()
	set, err := h.loadAll()
	if err != nil {
		h.log.Error("plugins: reload failed; keeping the previous version", "dir", h.dir, "error", err.Error())
		return err
	}
	h.set.Store(set)
	h.log.Info("plugins: reloaded", "dir", h.dir, "plugins", len(set.plugins))
	return nil
}

// Watch polls the .lua files' names, sizes and mtimes every interval and
// reloads on a change, until ctx ends.
func (h *Host) Watch(ctx context.Context, interval time.Duration) {
	dirwatch.Poll(ctx, interval, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.signature() != h.sig
	}, func() { h.Reload() })
}

func (h *Host) signature() string { return dirwatch.Signature(h.dir, ".lua", false) }

// Names lists the loaded plugins and their handlers.
func (h *Host) Names() []string {
	var out []string
	for _, p := range h.set.Load().plugins {
		var hs []string
		for _, x := range []struct {
			on   bool
			name string
		}{{p.onRequest, "on_request"}, {p.onComplete, "on_complete"}, {p.onTick, "on_tick"}} {
			if x.on {
				hs = append(hs, x.name)
			}
		}
		for r := range p.routes {
			hs = append(hs, r)
		}
		sort.Strings(hs)
		out = append(out, p.name+" ("+strings.Join(hs, ", ")+")")
	}
	return out
}

func (h *Host) loadPlugin(path string) (*plugin, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("plugins: %w", err)
	}
	name := strings.TrimSuffix(filepath.Base(path), ".lua")
	proto, err := compile(string(src), filepath.Base(path))
	if err != nil {
		return nil, fmt.Errorf("plugins: %v", err)
	}
	p := &plugin{name: name, path: path, src: proto, pool: make(chan *lua.LState, h.opts.MaxStates), h: h,
		routes: map[string]bool{}}
	L, err := p.newState()
	if err != nil {
		return nil, err
	}
	p.onRequest = L.GetGlobal("on_request").Type() == lua.LTFunction
	p.onComplete = L.GetGlobal("on_complete").Type() == lua.LTFunction
	p.onTick = L.GetGlobal("on_tick").Type() == lua.LTFunction
	if t, ok := L.GetGlobal("handlers").(*lua.LTable); ok {
		var bad error
		t.ForEach(func(k, v lua.LValue) {
			if k.Type() != lua.LTString || v.Type() != lua.LTFunction {
				bad = fmt.Errorf("plugins: %s: handlers maps %s to %s, want \"METHOD /path\" to a function", p.name, k.Type(), v.Type())
				return
			}
			p.routes[k.String()] = true
		})
		if bad != nil {
			L.Close()
			return nil, bad
		}
	}
	p.put(L)
	return p, nil
}

// newState opens a sandboxed state and runs the plugin file in it.
func (p *plugin) newState() (*lua.LState, error) {
	L := lua.NewState(lua.Options{SkipOpenLibs: true, CallStackSize: 200, RegistrySize: 1024 * 4,
		RegistryMaxSize: 1024 * 256, RegistryGrowStep: registryGrowStep, MinimizeStackMemory: true})
	for _, lib := range []struct {
		name string
		fn   lua.LGFunction
	}{{lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}, {lua.StringLibName, lua.OpenString}, {lua.MathLibName, lua.OpenMath}} {
		L.Push(L.NewFunction(lib.fn))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	// No file access: the base library's file loaders go.
	for _, n := range []string{"dofile", "loadfile", "require", "module", "collectgarbage", "_printregs"} {
		L.SetGlobal(n, lua.LNil)
	}
	hardenStringLib(L)
	hardenLoaders(L)
	p.logPrint(L)
	p.openAPI(L)
	ctx, cancel := context.WithTimeout(context.Background(), p.h.opts.Timeout)
	defer cancel()
	L.SetContext(ctx)
	L.Push(L.NewFunctionFromProto(p.src))
	err := L.PCall(0, 0, nil)
	L.RemoveContext()
	if err != nil {
		L.Close()
		return nil, fmt.Errorf("plugins: loading %s: %v", p.name, errText(err))
	}
	return L, nil
}

func (p *plugin) get() (*lua.LState, error) {
	select {
	case L := <-p.pool:
		return L, nil
	default:
		return p.newState()
	}
}

func (p *plugin) put(L *lua.LState) {
	L.SetTop(0)
	select {
	case p.pool <- L:
	default:
		L.Close()
	}
}

// PluginError is a failed plugin call.
type PluginError struct {
	Plugin, Handler, Msg string
	Traceback            string
}

func (e *PluginError) Error() string {
	return fmt.Sprintf("plugin %s: %s failed: %s", e.Plugin, e.Handler, e.Msg)
}

// call runs fn(args) on a pooled state with the timeout and returns its
// first result converted by conv (run while the state is still held).
func (p *plugin) call(handler string, fn func(L *lua.LState) lua.LValue, args func(L *lua.LState) []lua.LValue,
	conv func(L *lua.LState, v lua.LValue) error) error {
	L, err := p.get()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.h.opts.Timeout)
	L.SetContext(ctx)
	f := fn(L)
	err = L.CallByParam(lua.P{Fn: f, NRet: 1, Protect: true}, args(L)...)
	cancel()
	L.RemoveContext()
	if err != nil {
		pe := &PluginError{Plugin: p.name, Handler: handler, Msg: errText(err)}
		if ae, ok := err.(*lua.ApiError); ok {
			pe.Traceback = ae.StackTrace
		}
		p.h.log.Error("plugin failed", "plugin", p.name, "handler", handler, "error", pe.Msg, "traceback", pe.Traceback)
		// A state stopped mid-call may hold half-updated globals: drop it.
		L.Close()
		return pe
	}
	ret := L.Get(-1)
	L.Pop(1)
	if conv != nil {
		if err := conv(L, ret); err != nil {
			p.put(L)
			pe := &PluginError{Plugin: p.name, Handler: handler, Msg: err.Error()}
			p.h.log.Error("plugin failed", "plugin", p.name, "handler", handler, "error", pe.Msg)
			return pe
		}
	}
	p.put(L)
	return nil
}

func errText(err error) string {
	if ae, ok := err.(*lua.ApiError); ok && ae.Object != nil {
		return ae.Object.String()
	}
	return err.Error()
}

// Ensure *Host implements the server's plugin interfaces.
var (
	_ server.RequestFilter      = (*Host)(nil)
	_ server.CompletionObserver = (*Host)(nil)
	_ server.PluginHTTP         = (*Host)(nil)
)

// FilterRequest runs every plugin's on_request in name order; the first
// rejection wins.
func (h *Host) FilterRequest(r *server.HookRequest) (*server.Rejection, error) {
	for _, p := range h.set.Load().plugins {
		if !p.onRequest {
			continue
		}
		var rej *server.Rejection
		err := p.call("on_request", global("on_request"), func(L *lua.LState) []lua.LValue {
			return []lua.LValue{requestTable(L, r)}
		}, func(L *lua.LState, v lua.LValue) error {
			switch v := v.(type) {
			case *lua.LNilType:
				return nil
			case *lua.LTable:
				st, ok := v.RawGetString("status").(lua.LNumber)
				msg := v.RawGetString("message")
				if !ok || (msg.Type() != lua.LTString && msg != lua.LNil) {
					return fmt.Errorf("on_request returned a table without a numeric status and a string message")
				}
				rej = &server.Rejection{Status: int(st)}
				if msg != lua.LNil {
					rej.Message = msg.String()
				}
				return nil
			}
			return fmt.Errorf("on_request returned a %s, want nil or {status=…, message=…}", v.Type())
		})
		if err != nil || rej != nil {
			return rej, err
		}
	}
	return nil, nil
}

// ObserveCompletion runs every plugin's on_complete(request, response,
// usage); the first error is returned after all have run.
func (h *Host) ObserveCompletion(r *server.HookRequest, resp *server.HookResponse) error {
	var first error
	for _, p := range h.set.Load().plugins {
		if !p.onComplete {
			continue
		}
		err := p.call("on_complete", global("on_complete"), func(L *lua.LState) []lua.LValue {
			return []lua.LValue{requestTable(L, r), responseTable(L, resp), usageTable(L, resp)}
		}, nil)
		if err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Tick calls every plugin's on_tick(seconds); errors are logged.
func (h *Host) Tick(seconds float64) {
	for _, p := range h.set.Load().plugins {
		if p.onTick {
			p.call("on_tick", global("on_tick"), func(*lua.LState) []lua.LValue {
				return []lua.LValue{lua.LNumber(seconds)}
			}, nil)
		}
	}
}

// RunTicks calls Tick every interval until ctx ends.
func (h *Host) RunTicks(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			h.Tick(now.Sub(last).Seconds())
			last = now
		}
	}
}

// ServePlugin answers /plugins/<name>/<path> with the plugin's handler for
// "METHOD /path", else "/path".
func (h *Host) ServePlugin(r *server.PluginRequest) (server.PluginResponse, bool, error) {
	var resp server.PluginResponse
	p := h.set.Load().byName[r.Plugin]
	if p == nil {
		return resp, false, nil
	}
	key := r.Method + " " + r.Path
	if !p.routes[key] {
		key = r.Path
		if !p.routes[key] {
			return resp, false, nil
		}
	}
	err := p.call("handler "+key, func(L *lua.LState) lua.LValue {
		// The plugin may have replaced handlers since it was loaded: a nil
		// handler fails the call ("attempt to call a nil value").
		t, ok := L.GetGlobal("handlers").(*lua.LTable)
		if !ok {
			return lua.LNil
		}
		return t.RawGetString(key)
	}, func(L *lua.LState) []lua.LValue {
		t := L.NewTable()
		t.RawSetString("method", lua.LString(r.Method))
		t.RawSetString("path", lua.LString(r.Path))
		t.RawSetString("query", lua.LString(r.Query))
		t.RawSetString("api_key", lua.LString(r.APIKey))
		t.RawSetString("body", lua.LString(r.Body))
		return []lua.LValue{t}
	}, func(L *lua.LState, v lua.LValue) error {
		switch v := v.(type) {
		case lua.LString:
			resp.Status, resp.Body = 200, []byte(v)
			return nil
		case *lua.LTable:
			if st, ok := v.RawGetString("status").(lua.LNumber); ok {
				resp.Status = int(st)
			}
			switch b := v.RawGetString("body").(type) {
			case lua.LString:
				resp.Body = []byte(b)
			case *lua.LTable:
				js, err := encodeJSON(b)
				if err != nil {
					return err
				}
				resp.Body, resp.ContentType = js, "application/json"
			}
			if ct, ok := v.RawGetString("content_type").(lua.LString); ok {
				resp.ContentType = string(ct)
			}
			return nil
		}
		return fmt.Errorf("the handler returned a %s, want a string or {status=…, body=…}", v.Type())
	})
	return resp, true, err
}

func global(name string) func(L *lua.LState) lua.LValue {
	return func(L *lua.LState) lua.LValue { return L.GetGlobal(name) }
}
