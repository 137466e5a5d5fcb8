package e2e

import (
	"math"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

func hello(extra map[string]any) map[string]any {
	body := map[string]any{
		"model":    "anything",
		"messages": []map[string]any{{"role": "user", "content": "Hello, who are you?"}},
	}
	for k, v := range extra {
		body[k] = v
	}
	return body
}

func TestHealthAndModels(t *testing.T) {
	ts := shared(t)
	st, body := get(t, ts.URL+"/health")
	if st != 200 || gjson.GetBytes(body, "status").Str != "ok" {
		t.Fatalf("/health: %d %s", st, body)
	}
	st, body = get(t, ts.URL+"/v1/models")
	m := gjson.ParseBytes(body)
	if st != 200 || m.Get("object").Str != "list" || m.Get("data.#").Int() != 1 {
		t.Fatalf("/v1/models: %d %s", st, body)
	}
	id := m.Get("data.0.id").Str
	if id == "" || m.Get("data.0.object").Str != "model" || m.Get("data.0.max_model_len").Int() != 2048 {
		t.Fatalf("/v1/models entry: %s", body)
	}
	if st, body = get(t, ts.URL+"/v1/models/"+id); st != 200 || gjson.GetBytes(body, "id").Str != id {
		t.Fatalf("/v1/models/%s: %d %s", id, st, body)
	}
	if st, body = get(t, ts.URL+"/v1/models/nope"); st != 404 || gjson.GetBytes(body, "error.code").Str != "not_found" {
		t.Fatalf("/v1/models/nope: %d %s", st, body)
	}
}

func TestTokenizeDetokenize(t *testing.T) {
	ts := shared(t)
	st, _, r := post(t, ts.URL+"/tokenize", `{"prompt":"Hello world<|im_end|>","return_token_strs":true}`)
	if st != 200 {
		t.Fatalf("/tokenize: %d %s", st, r.Raw)
	}
	// Qwen3: "Hello" 9707, " world" 1879, <|im_end|> 151645.
	if got := r.Get("tokens").Raw; got != "[9707,1879,151645]" {
		t.Errorf("tokens = %s", got)
	}
	if r.Get("count").Int() != 3 || r.Get("max_model_len").Int() != 2048 || r.Get("token_strs.1").Str != "Ġworld" {
		t.Errorf("tokenize response %s", r.Raw)
	}
	st, _, r = post(t, ts.URL+"/detokenize", `{"tokens":[9707,1879,151645]}`)
	if st != 200 || r.Get("prompt").Str != "Hello world<|im_end|>" {
		t.Errorf("/detokenize: %d %s", st, r.Raw)
	}
	st, _, r = post(t, ts.URL+"/detokenize", `{"tokens":[9707,99999999]}`)
	if st != 400 || r.Get("error.param").Str != "tokens[1]" {
		t.Errorf("/detokenize out of range: %d %s", st, r.Raw)
	}
	// Chat messages count the rendered prompt.
	st, _, r = post(t, ts.URL+"/tokenize", hello(nil))
	if st != 200 || r.Get("count").Int() < 8 {
		t.Errorf("/tokenize messages: %d %s", st, r.Raw)
	}
}

func TestApplyTemplate(t *testing.T) {
	ts := shared(t)
	body := `{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"},{"type":"text","text":"there"}]}],
		"chat_template_kwargs":{"enable_thinking":false}}`
	st, _, r := post(t, ts.URL+"/apply-template", body)
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi\nthere<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	if st != 200 || r.Get("prompt").Str != want {
		t.Fatalf("/apply-template: %d\n got %q\nwant %q", st, r.Get("prompt").Str, want)
	}
	// Tools are rendered with their keys in the client's order.
	body = `{"messages":[{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"z":{"type":"string"},"a":{"type":"integer"}}}}}]}`
	_, _, r = post(t, ts.URL+"/apply-template", body)
	if p := r.Get("prompt").Str; !strings.Contains(p, `{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"z": {"type": "string"}, "a": {"type": "integer"}}}}}`) {
		t.Errorf("tools not rendered in order: %q", p)
	}
}

func TestChatNonStreaming(t *testing.T) {
	ts := shared(t)
	_, _, tok := post(t, ts.URL+"/tokenize", hello(nil))
	st, _, r := post(t, ts.URL+"/v1/chat/completions", hello(map[string]any{"max_tokens": 12, "ignore_eos": true}))
	if st != 200 {
		t.Fatalf("status %d: %s", st, r.Raw)
	}
	if !strings.HasPrefix(r.Get("id").Str, "chatcmpl-") || r.Get("object").Str != "chat.completion" || r.Get("created").Int() == 0 {
		t.Errorf("envelope: %s", r.Raw)
	}
	ch := r.Get("choices.0")
	if ch.Get("message.role").Str != "assistant" || ch.Get("message.content").Str == "" || ch.Get("finish_reason").Str != "length" {
		t.Errorf("choice: %s", ch.Raw)
	}
	u := r.Get("usage")
	if u.Get("completion_tokens").Int() != 12 || u.Get("prompt_tokens").Int() != tok.Get("count").Int() ||
		u.Get("total_tokens").Int() != u.Get("prompt_tokens").Int()+12 || !u.Get("prompt_tokens_details.cached_tokens").Exists() {
		t.Errorf("usage %s (prompt should be %d tokens)", u.Raw, tok.Get("count").Int())
	}
}

// TestStreamingMatchesNonStreaming: greedy decoding gives the same text both
// ways, and the stream has the OpenAI chunk sequence.
func TestStreamingMatchesNonStreaming(t *testing.T) {
	ts := shared(t)
	req := hello(map[string]any{"max_tokens": 16, "temperature": 0, "ignore_eos": true})
	_, _, whole := post(t, ts.URL+"/v1/chat/completions", req)
	req["stream"] = true
	req["stream_options"] = map[string]any{"include_usage": true}
	events := streamEvents(t, ts.URL+"/v1/chat/completions", req)
	d := assembleChat(t, events)
	if d.role != "assistant" {
		t.Errorf("first chunk role %q", d.role)
	}
	if want := whole.Get("choices.0.message.content").Str; d.content != want {
		t.Errorf("streamed %q, whole %q", d.content, want)
	}
	if d.finish != "length" || d.usage.Get("completion_tokens").Int() != 16 {
		t.Errorf("finish %q usage %s", d.finish, d.usage.Raw)
	}
	// The usage chunk comes last, with empty choices.
	last := gjson.Parse(events[len(events)-2])
	if last.Get("choices.#").Int() != 0 || !last.Get("usage").Exists() {
		t.Errorf("usage chunk %s", last.Raw)
	}
	ids := map[string]bool{}
	for _, ev := range events[:len(events)-1] {
		ids[gjson.Get(ev, "id").Str] = true
	}
	if len(ids) != 1 {
		t.Errorf("chunks carry %d different ids", len(ids))
	}
	// Without include_usage no usage chunk is sent.
	delete(req, "stream_options")
	for _, ev := range streamEvents(t, ts.URL+"/v1/chat/completions", req) {
		if gjson.Get(ev, "usage").Exists() {
			t.Errorf("usage without include_usage: %s", ev)
		}
	}
}

func TestSeedReproducible(t *testing.T) {
	ts := shared(t)
	req := hello(map[string]any{"max_tokens": 10, "temperature": 1.0, "top_k": 0, "top_p": 1, "seed": 1234, "ignore_eos": true})
	_, _, a := post(t, ts.URL+"/v1/chat/completions", req)
	_, _, b := post(t, ts.URL+"/v1/chat/completions", req)
	if x, y := a.Get("choices.0.message.content").Str, b.Get("choices.0.message.content").Str; x != y || x == "" {
		t.Errorf("same seed, different text: %q vs %q", x, y)
	}
}

// TestStopString: the reply ends right before the stop string, both whole
// and streamed, with finish_reason stop.
func TestStopString(t *testing.T) {
	ts := shared(t)
	req := hello(map[string]any{"max_tokens": 24, "temperature": 0, "ignore_eos": true})
	_, _, full := post(t, ts.URL+"/v1/chat/completions", req)
	text := full.Get("choices.0.message.content").Str
	if len([]rune(text)) < 12 {
		t.Fatalf("greedy text too short to cut: %q", text)
	}
	r := []rune(text)
	stop := string(r[len(r)/2 : len(r)/2+3])
	want := text[:strings.Index(text, stop)]
	req["stop"] = []string{"never appears", stop}
	_, _, cut := post(t, ts.URL+"/v1/chat/completions", req)
	if got := cut.Get("choices.0.message.content").Str; got != want || cut.Get("choices.0.finish_reason").Str != "stop" {
		t.Errorf("stop %q: got %q (%s), want %q", stop, got, cut.Get("choices.0.finish_reason").Str, want)
	}
	if cut.Get("usage.completion_tokens").Int() >= 24 {
		t.Errorf("generation was not cut at the stop string: %s", cut.Get("usage").Raw)
	}
	req["stream"] = true
	d := assembleChat(t, streamEvents(t, ts.URL+"/v1/chat/completions", req))
	if d.content != want || d.finish != "stop" {
		t.Errorf("streamed with stop: %q (%s), want %q", d.content, d.finish, want)
	}
}

func TestChatLogprobs(t *testing.T) {
	ts := shared(t)
	req := hello(map[string]any{"max_tokens": 6, "temperature": 0, "ignore_eos": true, "logprobs": true, "top_logprobs": 3})
	_, _, r := post(t, ts.URL+"/v1/chat/completions", req)
	lps := r.Get("choices.0.logprobs.content").Array()
	if len(lps) != 6 {
		t.Fatalf("%d logprob entries for 6 tokens: %s", len(lps), r.Get("choices.0.logprobs").Raw)
	}
	var joined []byte
	for _, lp := range lps {
		top := lp.Get("top_logprobs").Array()
		if len(top) != 3 || lp.Get("logprob").Float() > 0 || !lp.Get("bytes").IsArray() {
			t.Fatalf("entry %s", lp.Raw)
		}
		// Greedy: the chosen token is the most likely one.
		if math.Abs(top[0].Get("logprob").Float()-lp.Get("logprob").Float()) > 1e-6 || top[0].Get("token").Str != lp.Get("token").Str {
			t.Errorf("greedy token %s is not the top alternative %s", lp.Raw, top[0].Raw)
		}
		if top[0].Get("logprob").Float() < top[1].Get("logprob").Float() {
			t.Errorf("alternatives not sorted: %s", lp.Raw)
		}
		for _, b := range lp.Get("bytes").Array() {
			joined = append(joined, byte(b.Int()))
		}
	}
	// The tokens' bytes spell the content (unless the random model wrote
	// invalid UTF-8, which the content shows as U+FFFD).
	if content := r.Get("choices.0.message.content").Str; !strings.ContainsRune(content, '\uFFFD') && string(joined) != content {
		t.Errorf("logprob token bytes %q do not spell the content %q", joined, content)
	}
	req["stream"] = true
	d := assembleChat(t, streamEvents(t, ts.URL+"/v1/chat/completions", req))
	if len(d.logprobs) != 6 {
		t.Errorf("streamed %d logprob entries, want 6", len(d.logprobs))
	}
}

func TestCompletions(t *testing.T) {
	ts := shared(t)
	st, _, r := post(t, ts.URL+"/v1/completions", `{"prompt":"The capital of France is","max_tokens":5,"temperature":0,"ignore_eos":true}`)
	if st != 200 || r.Get("object").Str != "text_completion" || r.Get("usage.completion_tokens").Int() != 5 {
		t.Fatalf("completion: %d %s", st, r.Raw)
	}
	text := r.Get("choices.0.text").Str
	// The same prompt as token ids gives the same greedy text.
	_, _, tok := post(t, ts.URL+"/tokenize", `{"prompt":"The capital of France is"}`)
	_, _, r2 := post(t, ts.URL+"/v1/completions", `{"prompt":`+tok.Get("tokens").Raw+`,"max_tokens":5,"temperature":0,"ignore_eos":true}`)
	if r2.Get("choices.0.text").Str != text {
		t.Errorf("token-id prompt gave %q, text prompt %q", r2.Get("choices.0.text").Str, text)
	}
	// echo prepends the prompt.
	_, _, r3 := post(t, ts.URL+"/v1/completions", `{"prompt":"The capital of France is","max_tokens":5,"temperature":0,"ignore_eos":true,"echo":true}`)
	if r3.Get("choices.0.text").Str != "The capital of France is"+text {
		t.Errorf("echo: %q", r3.Get("choices.0.text").Str)
	}
	// Streaming gives the same text.
	events := streamEvents(t, ts.URL+"/v1/completions", `{"prompt":"The capital of France is","max_tokens":5,"temperature":0,"ignore_eos":true,"stream":true,"stream_options":{"include_usage":true}}`)
	var streamed string
	var usage gjson.Result
	for _, ev := range events[:len(events)-1] {
		streamed += gjson.Get(ev, "choices.0.text").Str
		if u := gjson.Get(ev, "usage"); u.Exists() {
			usage = u
		}
	}
	if streamed != text || usage.Get("completion_tokens").Int() != 5 {
		t.Errorf("streamed %q (usage %s), want %q", streamed, usage.Raw, text)
	}
}

// TestScoringMatchesGeneration: the log-probs of a greedy continuation, as
// reported while generating, equal those of scoring the whole sequence with
// echo + logprobs + max_tokens 0 (return_tokens_as_token_ids gives the ids).
func TestScoringMatchesGeneration(t *testing.T) {
	ts := shared(t)
	_, _, tok := post(t, ts.URL+"/tokenize", `{"prompt":"One two three four"}`)
	prompt := tok.Get("tokens").Raw
	_, _, gen := post(t, ts.URL+"/v1/completions", `{"prompt":`+prompt+`,"max_tokens":4,"temperature":0,"ignore_eos":true,"logprobs":2,"return_tokens_as_token_ids":true}`)
	lp := gen.Get("choices.0.logprobs")
	genLP := lp.Get("token_logprobs").Array()
	if len(genLP) != 4 {
		t.Fatalf("generation logprobs: %s", lp.Raw)
	}
	ids := strings.TrimSuffix(prompt, "]")
	for _, tk := range lp.Get("tokens").Array() {
		id, ok := strings.CutPrefix(tk.Str, "token_id:")
		if !ok {
			t.Fatalf("token %q is not token_id:N", tk.Str)
		}
		ids += "," + id
	}
	ids += "]"
	st, _, sc := post(t, ts.URL+"/v1/completions", `{"prompt":`+ids+`,"max_tokens":0,"echo":true,"logprobs":2}`)
	if st != 200 {
		t.Fatalf("scoring: %d %s", st, sc.Raw)
	}
	n := int(tok.Get("count").Int())
	slp := sc.Get("choices.0.logprobs")
	scored := slp.Get("token_logprobs").Array()
	if len(scored) != n+4 || scored[0].Type != gjson.Null || slp.Get("top_logprobs.0").Type != gjson.Null {
		t.Fatalf("scoring logprobs: %s", slp.Raw)
	}
	if slp.Get("top_logprobs.1.@keys.#").Int() < 1 || sc.Get("usage.completion_tokens").Int() != 0 || sc.Get("choices.0.finish_reason").Str != "length" {
		t.Errorf("scoring alternatives/usage: %s", sc.Raw)
	}
	for i := 0; i < 4; i++ {
		if d := math.Abs(scored[n+i].Float() - genLP[i].Float()); d > 2e-3 {
			t.Errorf("token %d: scored %v, generated %v", i, scored[n+i].Float(), genLP[i].Float())
		}
	}
}
