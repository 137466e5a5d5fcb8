package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/plugins"
	"github.com/infernix/infernix/script"
	"github.com/infernix/infernix/server"
)

// hookFlags configure Starlark hooks (--scripts) and Lua plugins
// (--plugins).
type hookFlags struct {
	scripts      string
	maxSteps     uint64
	timeoutMS    int
	pollMS       int
	plugins      string
	pluginLines  string
	pluginTickMS int
}

func (f *hookFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.scripts, "scripts", "", "load Starlark hooks from every .star file in DIR (route, sampling, thinking_budget, parse_tool_calls, grammar, on_response); reloaded on SIGHUP and on change")
	fs.Uint64Var(&f.maxSteps, "script-max-steps", script.DefaultMaxSteps, "Starlark execution steps allowed per hook call")
	fs.IntVar(&f.timeoutMS, "script-timeout-ms", 1000, "wall-clock limit of one hook or plugin call in milliseconds")
	fs.IntVar(&f.pollMS, "script-poll-ms", 2000, "how often to check the scripts and plugins for changes (0 = only on SIGHUP)")
	fs.StringVar(&f.plugins, "plugins", "", "load Lua plugins from every .lua file in DIR (on_request, on_complete, on_tick, HTTP handlers under /plugins/NAME/)")
	fs.StringVar(&f.pluginLines, "plugin-lines", "", "file that plugins' write_line() appends to (e.g. the audit plugin's log)")
	fs.IntVar(&f.pluginTickMS, "plugin-tick-ms", 1000, "interval of the plugins' on_tick in milliseconds")
}

// load builds the server's hooks and starts their background work (reload
// on SIGHUP and file change, plugin ticks) until the returned stop is
// called. nil hooks: none configured.
//
// bs, when not nil, keeps the plugins' kv state (the data directory's
// store, so quotas survive restarts); nil keeps it in memory.
func (f *hookFlags) load(w io.Writer, log *slog.Logger, bs plugins.ByteStore) (*server.Hooks, func(), error) {
	if f.scripts == "" && f.plugins == "" {
		return nil, func() {}, nil
	}
	timeout := time.Duration(f.timeoutMS) * time.Millisecond
	if timeout <= 0 {
		return nil, nil, fmt.Errorf("--script-timeout-ms must be positive")
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &server.Hooks{}
	var closers []func()
	var reloads []func()
	stop := func() {
		cancel()
		for _, c := range closers {
			c()
		}
	}
	if f.scripts != "" {
		e, err := script.Load(f.scripts, script.Options{MaxSteps: f.maxSteps, Timeout: timeout, Logger: log})
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("--scripts: %w", err)
		}
		h.Router, h.Thinking, h.Sampling, h.Grammar, h.Tools, h.Editor = e, e, e, e, e, e
		reloads = append(reloads, func() { e.Reload() })
		if f.pollMS > 0 {
			go e.Watch(ctx, time.Duration(f.pollMS)*time.Millisecond)
		}
		fmt.Fprintf(w, "infernix: scripts from %s: %s\n", f.scripts, strings.Join(e.Hooks(), ", "))
	}
	if f.plugins != "" {
		opts := plugins.Options{Timeout: timeout, Logger: log, LineFile: f.pluginLines}
		if bs != nil {
			opts.KV = plugins.NewStoreKV(bs, "plugin-kv/")
		}
		ph, err := plugins.Load(f.plugins, opts)
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("--plugins: %w", err)
		}
		closers = append(closers, func() { ph.Close() })
		h.Filters = append(h.Filters, ph)
		h.Observers = append(h.Observers, ph)
		h.HTTP = ph
		reloads = append(reloads, func() { ph.Reload() })
		if f.pollMS > 0 {
			go ph.Watch(ctx, time.Duration(f.pollMS)*time.Millisecond)
		}
		if f.pluginTickMS > 0 {
			go ph.RunTicks(ctx, time.Duration(f.pluginTickMS)*time.Millisecond)
		}
		fmt.Fprintf(w, "infernix: plugins from %s: %s\n", f.plugins, strings.Join(ph.Names(), "; "))
	}
	// SIGHUP reloads scripts and plugins (each keeps its previous version
	// when the new one fails to load).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	closers = append(closers, func() { signal.Stop(hup) })
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				for _, r := range reloads {
					r()
				}
			}
		}
	}()
	return h, stop, nil
}

// pluginStore is the data directory's store (--data-dir), or nil.
func pluginStore(e *engine.Engine) plugins.ByteStore {
	if d, ok := e.Persist.(*dataDir); ok && d.st != nil {
		return d.st
	}
	return nil
}
