package server

import (
	"github.com/infernix/infernix/engine/toolcall"
)

// Hooks are the extension points the server calls while serving a
// generation (dependencies point inward: package script implements them in
// Starlark, package plugins in Lua, cmd/infernix wires them). Every field is
// optional. Implementations must be safe for concurrent use; a hook that
// returns an error fails the request it was called for with a 500 naming
// the hook (the error's text), and the server keeps serving.
//
// The hooks run on the API-neutral core (chatJob, generation.run), so every
// API that builds a chatRequest gets them.
type Hooks struct {
	Filters   []RequestFilter      // Lua on_request: first, may reject
	Router    Router               // Starlark route
	Thinking  ThinkingBudgeter     // Starlark thinking_budget
	Sampling  SamplingOverrider    // Starlark sampling
	Grammar   GrammarProvider      // Starlark grammar (JSON schemas and GBNF enforced)
	Tools     ToolCallParser       // Starlark parse_tool_calls
	Editor    ResponseEditor       // Starlark on_response (every reply; holds streams back)
	Observers []CompletionObserver // Lua on_complete: last, errors only logged
	HTTP      PluginHTTP           // Lua HTTP handlers under /plugins/<name>/
}

// HookRequest is the read-only view of a request that hooks see.
type HookRequest struct {
	Endpoint        string // the API path, e.g. /v1/chat/completions
	Model           string // the model the client named
	ServedModel     string // the model this server serves
	APIKey          string // the client's key ("" without one)
	User            string
	Stream          bool
	MaxTokens       int // -1: not given
	ReasoningEffort string
	ThinkingBudget  int // -1: not given
	Temperature     *float64
	TopP            *float64
	ToolFormat      string   // json or xml: the served model's tool syntax
	Tools           []string // the declared function names
	Messages        []HookMessage
}

// HookMessage is one chat message: its role and its text.
type HookMessage struct {
	Role, Content string
}

// Rejection refuses a request with an HTTP status (4xx or 5xx; others
// read as 400) and a message for the client.
type Rejection struct {
	Status  int
	Message string
}

// RequestFilter may reject a request before anything else runs. A nil
// *Rejection lets it through.
type RequestFilter interface {
	FilterRequest(r *HookRequest) (*Rejection, error)
}

// RouteResult is what a Router decided. Zero fields change nothing.
type RouteResult struct {
	// Model is the model the request is routed to; it must be the served
	// model's name (a route to another model is a 404).
	Model           string
	Reject          *Rejection
	MaxTokens       *int
	ThinkingBudget  *int
	ReasoningEffort *string
}

// Router maps a request to a model and request-field overrides, or rejects
// it.
type Router interface {
	Route(r *HookRequest) (RouteResult, error)
}

// ThinkingBudgeter decides a thinking-token budget; ok false keeps the
// server's own (thinking_budget, reasoning_effort, the default).
type ThinkingBudgeter interface {
	ThinkingBudget(r *HookRequest) (budget int, ok bool, err error)
}

// SamplingOverrides replace the request's sampling settings; nil fields
// keep them. LogitBias is keyed by token text (each string's first token
// gets the bias). Stop strings are added to the request's.
type SamplingOverrides struct {
	Temperature, TopP, MinP                              *float64
	TopK                                                 *int
	PresencePenalty, FrequencyPenalty, RepetitionPenalty *float64
	LogitBias                                            map[string]float64
	Stop                                                 []string
}

// SamplingOverrider overrides sampling settings per request.
type SamplingOverrider interface {
	Sampling(r *HookRequest) (SamplingOverrides, error)
}

// GrammarProvider returns a JSON schema or grammar text constraining the
// output ("" for none). A JSON schema (an object or true) or a GBNF grammar
// (any other text) is enforced on the answer by constrained decoding
// (constrained.go). Implementations validate what they return.
type GrammarProvider interface {
	Grammar(r *HookRequest) (string, error)
}

// ToolCallParser replaces the built-in tool-call parser for the formats it
// handles. It sees the whole reply (after the thinking) once generation
// ends, so a streamed reply's content and calls arrive at the end.
type ToolCallParser interface {
	Handles(format string) bool
	ParseToolCalls(text string, tools []toolcall.Tool) (calls []toolcall.Call, remaining string, err error)
}

// ToolCallStreamer is optionally implemented by a ToolCallParser: streamed
// replies are then parsed as they arrive instead of at the end.
type ToolCallStreamer interface {
	StreamsToolCalls(format string) bool
	NewToolCallStream(tools []toolcall.Tool) ToolCallStream
}

// ToolCallStream parses one streamed reply. Feed takes the next chunk
// (final: the reply ended; chunk is then empty) and returns what is decided,
// in order: content text and complete calls.
type ToolCallStream interface {
	Feed(chunk string, final bool) ([]ToolPiece, error)
}

// ToolPiece is content text, or a complete call when Call is set.
type ToolPiece struct {
	Content string
	Call    *toolcall.Call
}

// HookResponse is the final reply as hooks see it.
type HookResponse struct {
	Content, Reasoning string
	ToolCalls          []toolcall.Call
	Finish             string
	PromptTokens       int
	CompletionTokens   int
	Tags               map[string]string // set by a ResponseEditor
}

// ResponseEdit changes a reply. A nil Content keeps the text; ToolCalls
// replaces the calls when ReplaceCalls is set (ignored by /v1/completions,
// which has no calls). Tags go to the request log line, the server log and
// the observers.
type ResponseEdit struct {
	Content      *string
	ToolCalls    []toolcall.Call
	ReplaceCalls bool
	Tags         map[string]string
}

// ResponseEditor edits a reply before it is sent, in every API (chat,
// Messages, Responses, completions). While one is configured a streamed
// reply is generated whole and held back, edited, then streamed out: its
// events all arrive at the end. It is not called for a generation that
// failed or whose client went away.
type ResponseEditor interface {
	EditResponse(r *HookRequest, resp *HookResponse) (ResponseEdit, error)
}

// CompletionObserver sees every finished generation (quotas, audit logs).
// Its errors are logged, never sent: the reply has already gone.
type CompletionObserver interface {
	ObserveCompletion(r *HookRequest, resp *HookResponse) error
}

// PluginRequest is an HTTP request to /plugins/<Plugin>/<Path>.
type PluginRequest struct {
	Plugin, Path, Method, Query string
	APIKey                      string
	Body                        []byte
}

// PluginResponse is a plugin handler's answer.
type PluginResponse struct {
	Status      int
	ContentType string
	Body        []byte
}

// PluginHTTP serves plugin HTTP handlers. found false is a 404.
type PluginHTTP interface {
	ServePlugin(r *PluginRequest) (resp PluginResponse, found bool, err error)
}
