package server

import (
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/infernix/infernix/engine/constrain"
	"github.com/infernix/infernix/engine/toolcall"
)

// toolCallTag opens a call in Qwen's tool formats; toolCallEndTag closes it.
const (
	toolCallTag    = "<tool_call>"
	toolCallEndTag = "</tool_call>"
)

// Constrained decoding: response_format json_object / json_schema (chat),
// text.format (Responses) and the grammar hook's schemas and GBNF grammars are enforced
// by engine/constrain, token by token, on the answer (not on the reasoning,
// and not under a forced tool call); tool calls' arguments follow their
// tools' schemas under a forced call or for strict tools (callConstraint).

// maxCachedGrammars bounds the compiled schemas kept, with their mask
// caches, for requests that repeat a schema (agents send the same one).
const maxCachedGrammars = 64

type grammarCache struct {
	once  sync.Once
	vocab *constrain.Vocab
	mu    sync.Mutex
	m     map[string]*constrain.Grammar
}

// constraintVocab indexes the tokenizer's tokens once, on first use. Added
// and special tokens never appear in constrained output.
func (s *Server) constraintVocab() *constrain.Vocab {
	gc := &s.grammars
	gc.once.Do(func() {
		tk := s.eng.Tokenizer
		toks := make([][]byte, tk.VocabSize())
		for id := range toks {
			if t := int32(id); !tk.IsAdded(t) && !tk.IsSpecial(t) {
				toks[id] = tk.TokenBytes(t)
			}
		}
		gc.vocab = constrain.NewVocab(toks, s.vocab)
	})
	return gc.vocab
}

// grammar compiles a schema (JSON text), reusing a cached compile of the
// same text. param names the field the schema came from, for errors.
// strict: exactly, or an error (constrain.Compile); otherwise keywords that
// only narrow values and that the engine cannot enforce are ignored
// (constrain.CompileLoose), as OpenAI guarantees a schema only with strict.
func (s *Server) grammar(schema, param string, strict bool) (*constrain.Grammar, *APIError) {
	key := schema
	if !strict {
		key = "\x00loose" + schema
	}
	if g := s.grammars.get(key); g != nil {
		return g, nil
	}
	compile := constrain.CompileLoose
	if strict {
		compile = constrain.Compile
	}
	g, err := compile([]byte(schema))
	if err != nil {
		msg := err.Error()
		var se *constrain.SchemaError
		if errors.As(err, &se) {
			msg = param
			if se.Path != "" {
				msg += " at " + se.Path
			}
			msg += ": " + se.Msg
		}
		return nil, &APIError{Status: 400, Type: "invalid_request_error", Param: param, Code: "invalid_schema", Message: msg}
	}
	s.grammars.add(key, g)
	return g, nil
}

// get is the grammar cached under key, or nil.
func (gc *grammarCache) get(key string) *constrain.Grammar {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return gc.m[key]
}

// add caches g under key (a copy), dropping an arbitrary entry when full.
func (gc *grammarCache) add(key string, g *constrain.Grammar) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	if gc.m == nil {
		gc.m = map[string]*constrain.Grammar{}
	}
	if len(gc.m) >= maxCachedGrammars {
		for k := range gc.m {
			delete(gc.m, k)
			break
		}
	}
	gc.m[strings.Clone(key)] = g
}

// hookGrammar applies the grammar hook's result: a JSON schema (an object
// or true), or grammar text in GBNF; either is enforced.
func (s *Server) hookGrammar(j *job, g string) *APIError {
	t := strings.TrimSpace(g)
	if t == "" {
		return nil
	}
	var gr *constrain.Grammar
	var err *APIError
	if t[0] == '{' || t == "true" {
		gr, err = s.grammar(t, "grammar hook", true)
	} else {
		gr, err = s.outputGrammar(&outputFormat{format: g, formatParam: "grammar hook", formatKind: "grammar"})
	}
	if err != nil {
		return s.hookError("grammar", errors.New(err.Message))
	}
	if !j.forcedCall {
		j.grammar = gr
	}
	return nil
}

// callConstraint sets j's tool-call grammar where it applies: a forced
// call (tool_choice required or named: every call's arguments then follow
// their tool's schema, loosely unless the tool is strict), or a tool marked
// strict (every call the model opens with <tool_call> is constrained), in
// either tool format.
func (s *Server) callConstraint(req *chatRequest, j *job) *APIError {
	if len(req.toolList) == 0 {
		return nil
	}
	strict := false
	for _, st := range req.toolStrict {
		strict = strict || st
	}
	if !j.forcedCall && (!strict || s.toolCallOpen < 0) {
		return nil
	}
	var tools []constrain.Tool
	var params []string
	for i, t := range req.toolList {
		if req.toolChoice == "function" && t.Name != req.toolName {
			continue
		}
		ct := constrain.Tool{Name: t.Name, Parameters: t.Parameters}
		if i < len(req.toolStrict) {
			ct.Strict = req.toolStrict[i]
		}
		tools = append(tools, ct)
		p := "tools[" + strconv.Itoa(i) + "]"
		if i < len(req.toolParam) {
			p = req.toolParam[i]
		}
		params = append(params, p)
	}
	g, err := s.toolGrammar(tools, params, strict)
	if err != nil {
		return err
	}
	if g == nil {
		return nil
	}
	j.callGrammar = g
	if j.forcedCall {
		j.callPrefix = strings.TrimPrefix(s.forcedCallOpening(req), toolCallTag+"\n")
	}
	return nil
}

// toolGrammar compiles the call grammar of tools in the server's tool
// format, reusing a cached compile of the same list; params name the tools'
// schema fields, for errors. A list the format cannot constrain (the XML
// format's 64 tools) gives no grammar, and an error only when a tool is
// strict.
func (s *Server) toolGrammar(tools []constrain.Tool, params []string, strict bool) (*constrain.Grammar, *APIError) {
	var key strings.Builder
	key.WriteString("\x00tools " + s.toolFormat.String())
	for _, t := range tools {
		key.WriteString("\x00" + t.Name + "\x00")
		key.Write(t.Parameters)
		if t.Strict {
			key.WriteString("\x00strict")
		}
	}
	k := key.String()
	if g := s.grammars.get(k); g != nil {
		return g, nil
	}
	compile := constrain.ToolCall
	if s.toolFormat == toolcall.FormatXML {
		compile = constrain.ToolCallXML
	}
	g, err := compile(tools)
	if err != nil {
		msg, param := err.Error(), "tools"
		var te *constrain.ToolError
		if !errors.As(err, &te) && !strict {
			s.log.Debug("tool calls not constrained", "reason", err)
			return nil, nil
		}
		if te != nil {
			param = params[te.Index]
			msg = param
			if te.Err.Path != "" {
				msg += " at " + te.Err.Path
			}
			msg += ": " + te.Err.Msg + " (a strict tool's schema must be one constrained decoding can enforce)"
		}
		return nil, &APIError{Status: 400, Type: "invalid_request_error", Param: param, Code: "invalid_schema", Message: msg}
	}
	s.grammars.add(k, g)
	return g, nil
}
