// Package script runs user Starlark hooks (go.starlark.net) that customise
// the server: route, parse_tool_calls, thinking_budget, grammar, sampling
// and on_response (see docs/scripting.md). *Engine implements the server's
// hook interfaces (server.Router, server.ToolCallParser, …).
//
// Sandbox: every .star file directly in the scripts directory is compiled
// once and its globals frozen; load() resolves only .star files inside that
// directory; the predeclared modules are json, re, math, time (a clock fixed
// for each call) and log, with no file or network access. Each hook call
// runs on its own thread with a step limit and a wall-clock timeout
// (builtins that are one step however long they run are bounded by size:
// json.decode's nesting, json.encode's and re.sub's output, a returned
// value's JSON); an error, a runaway loop or a wrong return type is
// returned as a *HookError naming the hook and file:line, and its
// backtrace is logged.
//
// Reload (SIGHUP or a changed file, see Watch) compiles the whole directory
// again and swaps it in atomically; when that fails the previous version
// stays active and the error is logged.
package script

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

	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/infernix/infernix/internal/dirwatch"
)

// Hook names a script may define.
var hookNames = []string{"route", "parse_tool_calls", "stream_tool_calls", "thinking_budget", "grammar", "sampling", "on_response"}

// Options tune the sandbox.
type Options struct {
	// MaxSteps bounds the Starlark execution steps of one call (and of
	// loading one file); default 1e6.
	MaxSteps uint64
	// Timeout bounds one call's wall-clock time; default 1s.
	Timeout time.Duration
	// Logger receives load errors, backtraces and the scripts' log lines.
	Logger *slog.Logger
}

// DefaultMaxSteps is the step limit when Options sets none.
const DefaultMaxSteps = 1_000_000

// Engine is a loaded scripts directory. It is safe for concurrent use.
type Engine struct {
	dir  string
	opts Options
	log  *slog.Logger
	cur  atomic.Pointer[program]
	mu   sync.Mutex // serialises reloads
	sig  string     // the directory's files and mtimes at the last load attempt
}

// hookFn is one defined hook.
type hookFn struct {
	fn  *starlark.Function
	pos string // file:line of its def
}

// program is one successful load of the directory.
type program struct {
	hooks map[string]hookFn
	// toolFormats limits parse_tool_calls to these formats (TOOL_FORMATS);
	// nil: every format.
	toolFormats []string
	files       []string
}

// Load compiles every .star file directly in dir. An error names the file
// and position.
func Load(dir string, opts Options) (*Engine, error) {
	if opts.MaxSteps == 0 {
		opts.MaxSteps = DefaultMaxSteps
	}
	if opts.Timeout <= 0 {
		opts.Timeout = time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	e := &Engine{dir: abs, opts: opts, log: log}
	e.sig = e.signature()
	p, err := e.load()
	if err != nil {
		return nil, err
	}
	e.cur.Store(p)
	return e, nil
}

// Hooks lists the defined hooks with their positions, sorted.
func (e *Engine) Hooks() []string {
	p := e.cur.Load()
	var out []string
	for name, h := range p.hooks {
		out = append(out, name+" ("+h.pos+")")
	}
	sort.Strings(out)
	return out
}

// Has reports whether the active version defines hook name.
func (e *Engine) Has(name string) bool {
	_, ok := e.cur.Load().hooks[name]
	return ok
}

// Reload compiles the directory again. On failure the previous version
// stays active and the error is logged and returned.
func (e *Engine) Reload() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.sig = e.signature()
	p, err := e.load()
	if err != nil {
		e.log.Error("scripts: reload failed; keeping the previous version", "dir", e.dir, "error", err.Error())
		return err
	}
	e.cur.Store(p)
	e.log.Info("scripts: reloaded", "dir", e.dir, "files", len(p.files), "hooks", len(p.hooks))
	return nil
}

// Watch polls the directory's .star files' names, sizes and mtimes every
// interval and reloads on a change, until ctx ends.
func (e *Engine) Watch(ctx context.Context, interval time.Duration) {
	dirwatch.Poll(ctx, interval, func() bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.signature() != e.sig
	}, func() { e.Reload() })
}

// signature summarises every .star file under the directory (loaded
// libraries included).
func (e *Engine) signature() string { return dirwatch.Signature(e.dir, ".star", true) }

// fileOptions are the dialect: while loops and recursion are allowed (the
// step limit bounds them), as are sets and top-level control flow.
var fileOptions = &syntax.FileOptions{Set: true, While: true, TopLevelControl: true, Recursion: true}

// loader compiles files and their load()s for one load of the directory.
type loader struct {
	e       *Engine
	modules map[string]*loadEntry
}

type loadEntry struct {
	globals starlark.StringDict
	err     error
	busy    bool // being loaded: a second visit is a cycle
}

func (e *Engine) load() (*program, error) {
	ents, err := os.ReadDir(e.dir)
	if err != nil {
		return nil, fmt.Errorf("scripts: %w", err)
	}
	l := &loader{e: e, modules: map[string]*loadEntry{}}
	p := &program{hooks: map[string]hookFn{}}
	for _, ent := range ents {
		if ent.IsDir() || !strings.HasSuffix(ent.Name(), ".star") {
			continue
		}
		name := ent.Name()
		g, err := l.module(name)
		if err != nil {
			return nil, err
		}
		p.files = append(p.files, name)
		for _, hn := range hookNames {
			v, ok := g[hn]
			if !ok {
				continue
			}
			fn, ok := v.(*starlark.Function)
			if !ok {
				return nil, fmt.Errorf("scripts: %s: %s is a %s, want a function", name, hn, v.Type())
			}
			if prev, dup := p.hooks[hn]; dup {
				return nil, fmt.Errorf("scripts: %s is defined twice: %s and %s", hn, prev.pos, fn.Position())
			}
			if want := hookArity[hn]; fn.NumParams() < want && !fn.HasVarargs() {
				return nil, fmt.Errorf("scripts: %s: %s must take %d parameters", fn.Position(), hn, want)
			}
			p.hooks[hn] = hookFn{fn: fn, pos: posString(fn.Position())}
		}
		if v, ok := g["TOOL_FORMATS"]; ok {
			fs, err := stringList(v)
			if err != nil {
				return nil, fmt.Errorf("scripts: %s: TOOL_FORMATS: %v", name, err)
			}
			p.toolFormats = fs
		}
	}
	return p, nil
}

var hookArity = map[string]int{"route": 1, "parse_tool_calls": 2, "stream_tool_calls": 3, "thinking_budget": 1, "grammar": 1, "sampling": 1, "on_response": 2}

// module loads the file at rel (relative to the scripts directory) once.
func (l *loader) module(rel string) (starlark.StringDict, error) {
	if ent, ok := l.modules[rel]; ok {
		if ent.busy {
			return nil, fmt.Errorf("load cycle through %s", rel)
		}
		return ent.globals, ent.err
	}
	ent := &loadEntry{busy: true}
	l.modules[rel] = ent
	ent.globals, ent.err = l.exec(rel)
	ent.busy = false
	return ent.globals, ent.err
}

func (l *loader) exec(rel string) (starlark.StringDict, error) {
	path := filepath.Join(l.e.dir, rel)
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripts: %w", err)
	}
	_, prog, err := starlark.SourceProgramOptions(fileOptions, rel, src, predeclared.Has)
	if err != nil {
		return nil, fmt.Errorf("scripts: %w", err)
	}
	th := &starlark.Thread{Name: "load " + rel, Load: l.load, Print: l.e.print}
	th.SetMaxExecutionSteps(l.e.opts.MaxSteps)
	setClock(th, time.Now())
	th.SetLocal(loggerKey, l.e.log)
	stop := time.AfterFunc(l.e.opts.Timeout, func() { th.Cancel("timeout loading the file") })
	g, err := prog.Init(th, predeclared)
	stop.Stop()
	if err != nil {
		return nil, fmt.Errorf("scripts: loading %s: %s", rel, evalMessage(err))
	}
	g.Freeze()
	return g, nil
}

// load resolves load("x.star") inside the scripts directory only.
func (l *loader) load(_ *starlark.Thread, module string) (starlark.StringDict, error) {
	rel := filepath.Clean(filepath.FromSlash(module))
	if !strings.HasSuffix(rel, ".star") || filepath.IsAbs(rel) || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("load(%q): only .star files inside the scripts directory can be loaded", module)
	}
	return l.module(rel)
}

func (e *Engine) print(th *starlark.Thread, msg string) {
	e.log.Info("script print", "thread", th.Name, "msg", msg)
}

func posString(p syntax.Position) string {
	return fmt.Sprintf("%s:%d", p.Filename(), p.Line)
}

// evalMessage is an error with the innermost Starlark position when there
// is one.
func evalMessage(err error) string {
	if ee, ok := err.(*starlark.EvalError); ok {
		return framePos(ee.CallStack) + ": " + ee.Msg
	}
	return err.Error()
}

// framePos is the innermost script position of a call stack (skipping
// builtins such as fail).
func framePos(cs starlark.CallStack) string {
	for i := 0; i < len(cs); i++ {
		if p := cs.At(i).Pos; p.Line > 0 && p.Filename() != "<builtin>" {
			return posString(p)
		}
	}
	return "?"
}
