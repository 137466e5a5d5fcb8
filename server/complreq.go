package server

import (
	"math"

	"github.com/tidwall/gjson"
)

// complRequest is a decoded /v1/completions request.
type complRequest struct {
	prompt     string  // text prompt, or
	promptIDs  []int32 // token ids (exactly one of the two is set)
	gen        genParams
	echo       bool
	logprobs   int // -1: none; else alternatives per token (0 = only the chosen)
	stream     bool
	includeUse bool
	outputFormat
}

// defaultCompletionTokens is OpenAI's max_tokens default for completions.
const defaultCompletionTokens = 16

// decodeCompletion decodes a completions body.
func decodeCompletion(body string, vocab int) (*complRequest, *APIError) {
	root, err := parseBody(body)
	if err != nil {
		return nil, err
	}
	f := fieldsOf(root)
	req := &complRequest{logprobs: -1}
	if err := decodePrompt(f["prompt"], req, vocab); err != nil {
		return nil, err
	}
	if err := decodeGen(f, &req.gen, vocab, false); err != nil {
		return nil, err
	}
	if req.gen.maxTokens < 0 {
		req.gen.maxTokens = defaultCompletionTokens
	}
	var e *APIError
	if req.echo, _, e = optBool(f, "echo", "echo"); e != nil {
		return nil, e
	}
	if v, set, e := optInt(f, "logprobs", "logprobs", 0, maxTopLogprobs); e != nil {
		return nil, e
	} else if set {
		req.logprobs = int(v)
	}
	if req.stream, _, e = optBool(f, "stream", "stream"); e != nil {
		return nil, e
	}
	if so := f["stream_options"]; present(so) {
		if !so.IsObject() {
			return nil, fieldError("stream_options", "must be an object")
		}
		if req.includeUse, _, e = optBool(fieldsOf(so), "include_usage", "stream_options.include_usage"); e != nil {
			return nil, e
		}
	}
	for _, name := range []string{"n", "best_of"} {
		if v, set, e := optInt(f, name, name, 1, math.MaxInt32); e != nil {
			return nil, e
		} else if set && v != 1 {
			return nil, badRequest(name, "%s > 1 is not supported: send one request per completion", name)
		}
	}
	if s, set, e := optString(f, "suffix", "suffix"); e != nil {
		return nil, e
	} else if set && s != "" {
		return nil, badRequest("suffix", "suffix (fill-in-the-middle) is not supported")
	}
	if err := decodeGuided(f, &req.outputFormat); err != nil {
		return nil, err
	}
	if req.gen.maxTokens == 0 && req.stream {
		return nil, badRequest("max_tokens", "max_tokens 0 (prompt scoring) cannot be streamed")
	}
	return req, nil
}

// decodePrompt accepts a string, a list of one string, a list of token ids,
// or a list of one list of token ids.
func decodePrompt(r gjson.Result, req *complRequest, vocab int) *APIError {
	if !present(r) {
		return badRequest("prompt", "prompt is required")
	}
	if r.Type == gjson.String {
		if r.Str == "" {
			return badRequest("prompt", "prompt must not be empty")
		}
		req.prompt = r.Str
		return nil
	}
	if !r.IsArray() {
		return fieldError("prompt", "must be a string, an array of token ids, or an array holding one of those")
	}
	items := r.Array()
	if len(items) == 0 {
		return badRequest("prompt", "prompt must not be empty")
	}
	switch first := items[0]; {
	case first.Type == gjson.Number:
		ids, err := tokenIDs(r, "prompt", vocab)
		if err != nil {
			return err
		}
		req.promptIDs = ids
		return nil
	case len(items) > 1 && (first.Type == gjson.String || first.IsArray()):
		return badRequest("prompt", "prompt holds %d prompts; send one prompt per request", len(items))
	case first.Type == gjson.String:
		if first.Str == "" {
			return badRequest("prompt[0]", "prompt[0] must not be empty")
		}
		req.prompt = first.Str
		return nil
	case first.IsArray():
		ids, err := tokenIDs(first, "prompt[0]", vocab)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			return badRequest("prompt[0]", "prompt[0] must not be empty")
		}
		req.promptIDs = ids
		return nil
	}
	return fieldError("prompt", "must be a string, an array of token ids, or an array holding one of those")
}
