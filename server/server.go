package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/engine/reasoning"
	"github.com/infernix/infernix/engine/toolcall"
)

// Config configures a Server. The zero value works: no keys, no request
// log, defaults below.
type Config struct {
	// ModelName is the id served in /v1/models and responses (default: the
	// model directory's base name). Requests may name any model: the server
	// serves the one it has.
	ModelName string
	// APIKeys, when non-empty, are required on every endpoint but /health,
	// as "Authorization: Bearer KEY" or "x-api-key: KEY".
	APIKeys []string
	// RequestLog is a file to append one JSON line per request to.
	RequestLog string
	// MaxBodyBytes limits request bodies (default 16 MiB).
	MaxBodyBytes int
	// DefaultThinkingBudget caps thinking tokens for requests that set no
	// budget (0 or less: no cap).
	DefaultThinkingBudget int
	// ToolFormat overrides the tool-call syntax detected from the chat
	// template: "json" or "xml" ("" or "auto": detect).
	ToolFormat string
	// Logger receives startup, error and per-request debug lines (default:
	// discard).
	Logger *slog.Logger
	// Hooks are the scripts' and plugins' extension points (nil: none).
	Hooks *Hooks
	// ModelAliases are more model names the server answers to, and
	// AnyModelName serves whatever name a request gives (see modelnames.go).
	ModelAliases []string
	AnyModelName bool
	// ResponseStore keeps Responses API responses (default: in memory).
	ResponseStore ResponseStore
	// Usage keeps usage statistics for GET /v1/usage (nil: none).
	Usage UsageStore
}

// DefaultMaxBodyBytes is the request body limit when Config sets none.
const DefaultMaxBodyBytes = 16 << 20

// Server is the HTTP API over one engine.
type Server struct {
	eng       *engine.Engine
	cfg       Config
	app       *fiber.App
	met       *metrics
	reqlog    *requestLog
	keys      *keySet
	log       *slog.Logger
	modelName string
	created   int64
	vocab     int
	grammars  grammarCache // constrained decoding (constrained.go)
	ctxLen    int

	stopTokens                    []int32 // the model's end-of-generation ids
	thinkOpen, thinkClose         int32   // -1 when the tokenizer has no such token
	thinkOpenText, thinkCloseText string
	forceClose                    []int32 // inserted at a thinking budget
	toolFormat                    toolcall.Format
	toolCallOpen, toolCallClose   int32 // <tool_call>'s and </tool_call>'s ids (-1: none): strict tools' arguments are constrained between them

	baseCtx   context.Context
	cancelAll context.CancelFunc
}

// New builds a server over e. The engine must have a tokenizer.
func New(e *engine.Engine, cfg Config) (*Server, error) {
	if e.Tokenizer == nil {
		return nil, fmt.Errorf("%s has no tokenizer.json: the server needs one", e.Dir)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ResponseStore == nil {
		cfg.ResponseStore = NewMemoryResponseStore(0)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	s := &Server{eng: e, cfg: cfg, met: newMetrics(), keys: newKeySet(cfg.APIKeys), log: log,
		modelName: cfg.ModelName, created: time.Now().Unix(), thinkOpen: -1, thinkClose: -1, toolCallOpen: -1, toolCallClose: -1}
	if s.modelName == "" {
		s.modelName = filepath.Base(filepath.Clean(e.Dir))
		if ext := filepath.Ext(s.modelName); strings.EqualFold(ext, ".gguf") {
			s.modelName = strings.TrimSuffix(s.modelName, ext)
		}
	}
	s.vocab = e.Config.VocabSize
	s.ctxLen = e.Sched.Config().MaxContext
	s.stopTokens = e.StopTokens()
	s.thinkOpenText, s.thinkCloseText = reasoning.OpenMarker, reasoning.CloseMarker
	if id, ok := e.Tokenizer.TokenID(s.thinkOpenText); ok {
		if id2, ok2 := e.Tokenizer.TokenID(s.thinkCloseText); ok2 {
			s.thinkOpen, s.thinkClose = id, id2
			// The close the templates write after thinking (with a newline
			// first, so a cut sentence does not run into the marker).
			s.forceClose = e.Tokenizer.Encode(reasoning.ForcedClose)
		}
	}
	if id, ok := e.Tokenizer.TokenID(toolCallTag); ok {
		if id2, ok2 := e.Tokenizer.TokenID(toolCallEndTag); ok2 {
			s.toolCallOpen, s.toolCallClose = id, id2
		}
	}
	switch strings.ToLower(cfg.ToolFormat) {
	case "", "auto":
		s.toolFormat = toolcall.FormatFromTemplate(e.TemplateSource)
	case "json":
		s.toolFormat = toolcall.FormatJSON
	case "xml":
		s.toolFormat = toolcall.FormatXML
	default:
		return nil, fmt.Errorf("--tool-format %q: expected auto, json or xml", cfg.ToolFormat)
	}
	if cfg.RequestLog != "" {
		rl, err := openRequestLog(cfg.RequestLog)
		if err != nil {
			return nil, fmt.Errorf("--request-log: %w", err)
		}
		s.reqlog = rl
	}
	s.baseCtx, s.cancelAll = context.WithCancel(context.Background())
	s.app = fiber.New(fiber.Config{
		AppName:               "infernix",
		BodyLimit:             cfg.MaxBodyBytes,
		DisableStartupMessage: true,
		ErrorHandler:          s.errorHandler,
		ReadTimeout:           5 * time.Minute, // a slow upload of a large prompt
		IdleTimeout:           2 * time.Minute,
		ReadBufferSize:        16 << 10, // long Authorization headers and URLs
	})
	s.routes()
	return s, nil
}

// ModelName is the served model id.
func (s *Server) ModelName() string { return s.modelName }

// ToolFormat is the tool-call syntax in use.
func (s *Server) ToolFormat() toolcall.Format { return s.toolFormat }

// App exposes the Fiber app (tests use App().Test).
func (s *Server) App() *fiber.App { return s.app }

// Serve answers requests on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error { return s.app.Listener(ln) }

// Shutdown stops accepting connections, cancels running generations, and
// waits for handlers to return (up to ctx's deadline). The engine is the
// caller's to close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.cancelAll()
	err := s.app.ShutdownWithContext(ctx)
	if cerr := s.reqlog.close(); err == nil {
		err = cerr
	}
	return err
}

// endpoints are the metric labels of known routes (others count as
// "other"). The values are constants: Fiber's c.Path() aliases a buffer
// that is reused after the request.
var endpoints = map[string]string{}

func init() {
	for _, p := range []string{"/v1/chat/completions", "/v1/completions", "/v1/models", "/v1/usage", "/tokenize", "/detokenize",
		"/apply-template", "/health", "/metrics", "/v1/messages", "/v1/messages/count_tokens", "/v1/responses"} {
		endpoints[p] = p
	}
}

func endpointLabel(path string) string {
	if ep, ok := endpoints[path]; ok {
		return ep
	}
	if strings.HasPrefix(path, "/v1/models/") {
		return "/v1/models"
	}
	return "other"
}

func (s *Server) routes() {
	a := s.app
	a.Use(s.observe)
	a.Use(s.recoverPanics)
	a.Use(s.authMiddleware)
	a.Get("/health", s.handleHealth)
	a.Get("/metrics", s.handleMetrics)
	a.Get("/v1/models", s.handleModels)
	a.Get("/v1/models/+", s.handleModel)
	a.Get("/v1/usage", s.handleUsage)
	a.Post("/v1/chat/completions", s.handleChat)
	a.Post("/v1/completions", s.handleCompletions)
	a.Post("/tokenize", s.handleTokenize)
	a.Post("/detokenize", s.handleDetokenize)
	a.Post("/apply-template", s.handleApplyTemplate)
	a.Post("/v1/messages", s.handleMessages)
	a.Post("/v1/messages/count_tokens", s.handleCountTokens)
	a.Post("/v1/responses", s.handleResponses)
	a.Get("/v1/responses/:id", s.handleGetResponse)
	a.Delete("/v1/responses/:id", s.handleDeleteResponse)
	a.All("/plugins/+", s.handlePlugin)
}

// reqInfo travels in c.Locals: what the request log and metrics need.
type reqInfo struct {
	entry    LogEntry
	deferred bool // a stream writes the log line when it ends
}

const infoKey = "infernix.req"

func info(c *fiber.Ctx) *reqInfo {
	ri, _ := c.Locals(infoKey).(*reqInfo)
	return ri
}

// observe counts every request by endpoint and status, and writes the
// request log line for those that did not hand it to a stream.
func (s *Server) observe(c *fiber.Ctx) error {
	ri := &reqInfo{}
	ri.entry.Endpoint = strings.Clone(c.Path())
	ri.entry.Remote = strings.Clone(c.IP())
	ri.entry.apiKey = strings.Clone(requestKey(c))
	c.Locals(infoKey, ri)
	start := time.Now()
	err := c.Next()
	status := c.Response().StatusCode()
	var msg *string
	if err != nil {
		ae := asAPIError(err)
		status = ae.Status
		m := ae.Message
		msg = &m
	}
	ep := endpointLabel(c.Path())
	s.met.countRequest(ep, status)
	if ri.deferred || ep == "/health" || ep == "/metrics" {
		return err
	}
	ri.entry.Status = status
	ri.entry.Error = msg
	if ri.entry.Timings.Total == 0 {
		ri.entry.Timings.Total = ms(time.Since(start))
	}
	if ri.entry.ID == "" {
		ri.entry.ID = newID("req-")
	}
	s.logRequest(&ri.entry)
	if status >= 500 {
		s.log.Error("request failed", "endpoint", ep, "status", status, "error", derefOr(msg, ""))
	} else {
		s.log.Debug("request", "endpoint", ep, "status", status, "ms", ri.entry.Timings.Total)
	}
	return err
}

// recoverPanics turns a handler panic into a 500 (a bug, logged with its
// stack) instead of a crashed server.
func (s *Server) recoverPanics(c *fiber.Ctx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in handler", "path", c.Path(), "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			err = &APIError{Status: 500, Type: "server_error", Code: "internal_error", Message: fmt.Sprintf("internal error: %v", r)}
		}
	}()
	return c.Next()
}

// guardStream runs a stream writer body, turning a panic into a logged
// error event so that the process survives.
func (s *Server) guardStream(w *bufio.Writer, body func()) {
	s.guardStreamAs(w, false, body)
}

// guardStreamAs is guardStream with the error event in Anthropic's form
// (event: error, {"type":"error","error":{…}}) when anthropic is set.
func (s *Server) guardStreamAs(w *bufio.Writer, anthropic bool, body func()) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in stream", "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
			e := &APIError{Status: 500, Type: "server_error", Code: "internal_error", Message: fmt.Sprintf("internal error: %v", r)}
			var b []byte
			if anthropic {
				b = appendAnthropicError([]byte("event: error\ndata: "), e)
				b = append(b, "\n\n"...)
			} else {
				b = append(appendErrorJSON([]byte("data: "), e), "\n\ndata: [DONE]\n\n"...)
			}
			w.Write(b)
			w.Flush()
		}
	}()
	body()
}

func derefOr(p *string, d string) string {
	if p == nil {
		return d
	}
	return *p
}

// errorHandler answers every error in OpenAI's shape (Anthropic's on /v1/messages).
func (s *Server) errorHandler(c *fiber.Ctx, err error) error {
	if isAnthropicPath(c.Path()) {
		return sendAnthropicError(c, asAPIError(err))
	}
	return sendError(c, asAPIError(err))
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// newID returns prefix + 24 random alphanumerics (ids need to be unique,
// not secret).
func newID(prefix string) string {
	b := make([]byte, len(prefix)+24)
	copy(b, prefix)
	for i := len(prefix); i < len(b); i++ {
		b[i] = idAlphabet[rand.IntN(len(idAlphabet))]
	}
	return string(b)
}

func newCallID() string { return newID("call_") }

var errNoTemplate = &APIError{Status: 400, Type: "invalid_request_error", Code: "no_chat_template",
	Message: "this model has no chat template: use /v1/completions, or start the server with --chat-template FILE"}
