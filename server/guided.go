package server

import (
	"encoding/json"

	"github.com/infernix/infernix/engine/constrain"
	"github.com/tidwall/gjson"
)

// outputFormat is what the output must be: a JSON schema (response_format,
// text.format, guided_json, json_schema), a regular expression, a list of
// choices or a GBNF grammar (guided_regex, guided_choice, guided_grammar,
// structured_outputs, grammar), or nothing (formatParam "").
type outputFormat struct {
	// format is the schema's JSON text (kind ""), the pattern ("regex") or
	// the grammar ("grammar");
	// formatChoices the choices ("choice"). formatParam names the field it
	// came from, for errors. formatStrict: the schema said strict: true, so
	// it must be enforced exactly (else keywords that only narrow values and
	// that the engine cannot enforce are ignored).
	format, formatParam, formatKind string
	formatChoices                   []string
	formatStrict                    bool
}

// decodeGuided reads the fields vLLM and llama.cpp servers take for
// constrained output: guided_json, guided_regex, guided_choice,
// guided_grammar, structured_outputs {json, regex, choice, grammar,
// json_object}, and llama.cpp's json_schema and grammar. Grammars are GBNF
// (llama.cpp's format; vLLM's EBNF grammars in that syntax). One way of
// constraining the output per request.
func decodeGuided(f fields, of *outputFormat) *APIError {
	set := func(param, kind, text string, choices []string) *APIError {
		if of.formatParam != "" {
			return badRequest(param, "%s and %s both constrain the output: give one", of.formatParam, param)
		}
		of.formatParam, of.formatKind, of.format, of.formatChoices = param, kind, text, choices
		return nil
	}
	schema := func(r gjson.Result, param string) *APIError {
		switch {
		case r.IsObject():
			return set(param, "", r.Raw, nil)
		case r.Type == gjson.String && gjson.Valid(r.Str) && gjson.Parse(r.Str).IsObject():
			return set(param, "", r.Str, nil)
		}
		return fieldError(param, "must be a JSON schema (an object, or its JSON text)")
	}
	regex := func(r gjson.Result, param string) *APIError {
		if r.Type != gjson.String || r.Str == "" {
			return fieldError(param, "must be a non-empty string (a regular expression)")
		}
		return set(param, "regex", r.Str, nil)
	}
	choice := func(r gjson.Result, param string) *APIError {
		var ch []string
		if !r.IsArray() || json.Unmarshal([]byte(r.Raw), &ch) != nil || len(ch) == 0 {
			return fieldError(param, "must be a non-empty array of strings")
		}
		return set(param, "choice", "", ch)
	}
	grammar := func(r gjson.Result, param string) *APIError {
		if r.Type == gjson.String && r.Str == "" || r.Type == gjson.Null {
			return nil
		}
		if r.Type != gjson.String {
			return fieldError(param, "must be a string (a grammar in llama.cpp's GBNF)")
		}
		return set(param, "grammar", r.Str, nil)
	}
	for _, g := range []struct {
		key string
		fn  func(gjson.Result, string) *APIError
	}{{"guided_json", schema}, {"json_schema", schema}, {"guided_regex", regex}, {"guided_choice", choice}, {"guided_grammar", grammar}, {"grammar", grammar}} {
		if r := f[g.key]; present(r) && r.Type != gjson.Null {
			if err := g.fn(r, g.key); err != nil {
				return err
			}
		}
	}
	so := f["structured_outputs"]
	if !present(so) || so.Type == gjson.Null {
		return nil
	}
	if !so.IsObject() {
		return fieldError("structured_outputs", "must be an object with one of json, regex, choice or json_object")
	}
	sf := fieldsOf(so)
	for _, g := range []struct {
		key string
		fn  func(gjson.Result, string) *APIError
	}{{"json", schema}, {"regex", regex}, {"choice", choice}, {"grammar", grammar}} {
		if r := sf[g.key]; present(r) && r.Type != gjson.Null {
			if err := g.fn(r, "structured_outputs."+g.key); err != nil {
				return err
			}
		}
	}
	if r := sf["json_object"]; present(r) && r.Type == gjson.True {
		return set("structured_outputs.json_object", "", jsonObjectSchema, nil)
	}
	return nil
}

// outputGrammar compiles an output format (cached like schemas).
func (s *Server) outputGrammar(of *outputFormat) (*constrain.Grammar, *APIError) {
	var compile func() (*constrain.Grammar, error)
	var key string
	switch of.formatKind {
	case "":
		return s.grammar(of.format, of.formatParam, of.formatStrict)
	case "regex":
		key = "\x00regex " + of.format
		compile = func() (*constrain.Grammar, error) { return constrain.CompileRegex(of.format) }
	case "grammar":
		key = "\x00gbnf " + of.format
		compile = func() (*constrain.Grammar, error) { return constrain.CompileGBNF(of.format) }
	case "choice":
		b, _ := json.Marshal(of.formatChoices)
		key = "\x00choice " + string(b)
		compile = func() (*constrain.Grammar, error) { return constrain.CompileChoice(of.formatChoices) }
	}
	if g := s.grammars.get(key); g != nil {
		return g, nil
	}
	g, err := compile()
	if err != nil {
		return nil, &APIError{Status: 400, Type: "invalid_request_error", Param: of.formatParam, Code: "invalid_" + of.formatKind,
			Message: of.formatParam + ": " + err.Error()}
	}
	s.grammars.add(key, g)
	return g, nil
}
