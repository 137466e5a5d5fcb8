package server

import (
	"errors"
	"strings"
	"sync"

	"github.com/infernix/infernix/engine/constrain"
)

// Constrained decoding: response_format json_object / json_schema (chat),
// text.format (Responses) and the grammar hook's JSON schemas are enforced
// by engine/constrain, token by token, on the answer (not on the reasoning,
// and not under a forced tool call, whose arguments follow the tool's own
// format).

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
func (s *Server) grammar(schema, param string) (*constrain.Grammar, *APIError) {
	gc := &s.grammars
	gc.mu.Lock()
	g, ok := gc.m[schema]
	gc.mu.Unlock()
	if ok {
		return g, nil
	}
	g, err := constrain.Compile([]byte(schema))
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
	gc.mu.Lock()
	if gc.m == nil {
		gc.m = map[string]*constrain.Grammar{}
	}
	if len(gc.m) >= maxCachedGrammars {
		for k := range gc.m {
			delete(gc.m, k)
			break
		}
	}
	gc.m[strings.Clone(schema)] = g
	gc.mu.Unlock()
	return g, nil
}

// hookGrammar applies the grammar hook's result: a JSON schema (an object
// or true) is enforced; other grammar text is not supported and is logged.
func (s *Server) hookGrammar(j *job, g string) *APIError {
	t := strings.TrimSpace(g)
	if t == "" {
		return nil
	}
	if t[0] != '{' && t != "true" {
		s.log.Warn("the grammar hook returned grammar text; only JSON schemas are enforced", "bytes", len(g))
		return nil
	}
	gr, err := s.grammar(t, "grammar hook")
	if err != nil {
		return s.hookError("grammar", errors.New(err.Message))
	}
	if !j.forcedCall {
		j.grammar = gr
	}
	return nil
}
