package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/server"
)

func init() {
	register("serve", "OpenAI-compatible HTTP server (chat completions, completions, tokenize, metrics)", cmdServe)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

func cmdServe(args []string, stdout io.Writer) error {
	fs := newFlags("serve")
	var ef engineFlags
	ef.register(fs)
	ef.prefix.serveDefault = true
	var hf hookFlags
	hf.register(fs)
	host := fs.String("host", "127.0.0.1", "address to listen on (0.0.0.0 for every interface)")
	port := fs.Int("port", 8080, "TCP port (0 = any free port; the address is printed)")
	var keys stringList
	fs.Var(&keys, "api-key", "require this API key (repeatable); clients send 'Authorization: Bearer KEY' or 'x-api-key: KEY'")
	keysFile := fs.String("api-keys-file", "", "file of accepted API keys, one per line (# comments)")
	requestLog := fs.String("request-log", "", "append one JSON line per request to FILE")
	logFile := fs.String("log-file", "", "write the server log to FILE instead of stderr")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	thinkBudget := fs.Int("default-thinking-budget", 0, "cap thinking tokens for requests that set no budget (0 = no cap)")
	toolFormat := fs.String("tool-format", "auto", "tool-call syntax: auto (from the chat template), json or xml")
	var names stringList
	fs.Var(&names, "served-model-name", "model id in the API (default: the model directory's name); repeat for aliases, the first is the id")
	anyName := fs.Bool("any-model-name", false, "serve whatever model name a request gives (otherwise the Anthropic and Responses APIs answer an unknown name with 404)")
	bodyMB := fs.Int("max-body-mb", 16, "largest request body in MiB")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	logger, closeLog, err := newLogger(*logFile, *logLevel)
	if err != nil {
		return err
	}
	defer closeLog()
	if *keysFile != "" {
		more, err := server.ReadKeysFile(*keysFile)
		if err != nil {
			return err
		}
		keys = append(keys, more...)
	}
	if *port < 0 || *port > 65535 {
		return fmt.Errorf("--port %d: expected 0..65535", *port)
	}
	if *thinkBudget < 0 {
		return fmt.Errorf("--default-thinking-budget %d: must be 0 (no cap) or a positive number of tokens", *thinkBudget)
	}
	if *bodyMB <= 0 {
		return fmt.Errorf("--max-body-mb must be positive")
	}
	// Bind before loading so that a taken port fails fast.
	ln, err := net.Listen("tcp", net.JoinHostPort(*host, strconv.Itoa(*port)))
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("--host %s --port %d: address already in use (another server? pass another --port, or 0 for any free one)", *host, *port)
	}
	if err != nil {
		return fmt.Errorf("--host %s --port %d: %w", *host, *port, err)
	}
	defer ln.Close()
	start := time.Now()
	e, err := ef.load()
	if err != nil {
		return err
	}
	defer e.Close()
	var name string
	if len(names) > 0 {
		name = names[0]
	}
	hooks, stopHooks, err := hf.load(stdout, logger, pluginStore(e))
	if err != nil {
		return err
	}
	defer stopHooks()
	srv, err := server.New(e, server.Config{ModelName: name, APIKeys: keys, RequestLog: *requestLog,
		MaxBodyBytes: *bodyMB << 20, DefaultThinkingBudget: *thinkBudget, ToolFormat: *toolFormat, Logger: logger, ResponseStore: responseStore(e), Usage: usageStore(e),
		ModelAliases: names[min(1, len(names)):], AnyModelName: *anyName, Hooks: hooks})
	if err != nil {
		return err
	}
	// Signals shut down gracefully from the moment the address is printed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	printStartup(stdout, e, srv, ef, ln.Addr().String(), len(keys), time.Since(start))
	ef.prefix.describe(stdout, e)
	logger.Info("serving", "model", srv.ModelName(), "address", ln.Addr().String())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, net.ErrClosed) {
			return err
		}
		return nil
	case <-ctx.Done():
	}
	// A second signal stops waiting for requests (the engine still closes,
	// saving the prefix cache); a third one has the default effect.
	again := make(chan os.Signal, 1)
	signal.Notify(again, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(again)
	stop()
	fmt.Fprintln(stdout, "infernix: shutting down (a second signal stops waiting for requests)")
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	go func() {
		select {
		case <-again:
			signal.Stop(again)
			logger.Warn("second signal: not waiting for open requests")
			cancel()
		case <-sctx.Done():
		}
	}()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("shutdown", "error", err)
	}
	return nil
}

// printStartup tells the user what is being served and where.
func printStartup(w io.Writer, e *engine.Engine, srv *server.Server, ef engineFlags, addr string, nKeys int, took time.Duration) {
	cfg := e.Config
	sc := e.Sched.Config()
	c := e.Sched.Counters()
	kvBytes := int64(c.KVTotal) * int64(cfg.NumHiddenLayers) * 2 * backend.BlockSize * int64(cfg.NumKeyValueHeads*cfg.HeadDim) * 4
	device := ef.device
	if device == "" || device == "auto" {
		device = "cpu"
	}
	threads := ef.threads
	if threads <= 0 {
		threads = engine.DefaultThreads()
	}
	fmt.Fprintf(w, "infernix: model %s (%s, %d layers, hidden %d, vocab %d) from %s, loaded in %s\n",
		srv.ModelName(), cfg.Arch(), cfg.NumHiddenLayers, cfg.HiddenSize, cfg.VocabSize, e.Dir, took.Round(time.Millisecond))
	fmt.Fprintf(w, "infernix: device %s (%d threads); weights %s, KV cache %s (%d blocks); context %d, %d lanes, queue %d\n",
		device, threads, mib(e.WeightBytes), mib(kvBytes), c.KVTotal, sc.MaxContext, sc.MaxLanes, sc.MaxQueue)
	tmpl := "none (only /v1/completions)"
	if e.Template != nil {
		tmpl = "tool calls in " + srv.ToolFormat().String() + " format"
	}
	auth := "no API key required"
	if nKeys > 0 {
		auth = fmt.Sprintf("%d API key(s) required", nKeys)
	}
	fmt.Fprintf(w, "infernix: chat template: %s; %s\n", tmpl, auth)
	fmt.Fprintf(w, "infernix: listening on http://%s (OpenAI API at http://%s/v1)\n", addr, addr)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// newLogger writes text logs to stderr or --log-file at the given level.
func newLogger(file, level string) (*slog.Logger, func(), error) {
	var lv slog.Level
	switch strings.ToLower(level) {
	case "debug":
		lv = slog.LevelDebug
	case "info", "":
		lv = slog.LevelInfo
	case "warn", "warning":
		lv = slog.LevelWarn
	case "error":
		lv = slog.LevelError
	default:
		return nil, nil, fmt.Errorf("--log-level %q: expected debug, info, warn or error", level)
	}
	var out io.Writer = os.Stderr
	closeFn := func() {}
	if file != "" {
		f, err := os.OpenFile(file, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, fmt.Errorf("--log-file: %w", err)
		}
		out = f
		closeFn = func() { f.Close() }
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: lv})), closeFn, nil
}
