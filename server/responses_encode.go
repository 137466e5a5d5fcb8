package server

import (
	"bufio"
	"strings"
)

// responsesEncoder builds a Responses API response object and, when
// streaming, writes the API's SSE events (each with its sequence_number)
// as outputs arrive. Output items follow the generation: a reasoning item,
// a message item (one output_text part) and function_call items, a new
// item whenever the kind of output changes.
type responsesEncoder struct {
	s       *Server
	req     *responsesRequest
	id      string
	created int64
	model   string
	items   []respItem

	w   *bufio.Writer // nil: not streaming
	seq int64
	// beforeFinal, when set, runs with the final response object before
	// the stream's last event is sent (the handler stores the response
	// there, so that a client continuing it on that event finds it).
	beforeFinal func(final []byte)
	buf         []byte
	err         error
}

type respItem struct {
	kind         outKind // outContent (message), outReasoning, outCallStart (function_call)
	id           string
	callID, name string
	text         strings.Builder
	call         int
}

// emit takes one output (the generation's emit callback).
func (e *responsesEncoder) emit(o *output) error {
	n := len(e.items)
	switch o.kind {
	case outContent, outReasoning:
		if n == 0 || e.items[n-1].kind != o.kind {
			text := o.text
			if o.kind == outContent {
				if text = strings.TrimLeft(text, " \t\r\n"); text == "" {
					return nil
				}
			}
			prefix := "msg_"
			if o.kind == outReasoning {
				prefix = "rs_"
			}
			e.open(respItem{kind: o.kind, id: newID(prefix)})
			e.delta(len(e.items)-1, text)
			break
		}
		e.delta(n-1, o.text)
	case outCallStart:
		e.open(respItem{kind: outCallStart, id: newID("fc_"), callID: o.id, name: o.name, call: o.index})
	case outCallArgs:
		for i := n - 1; i >= 0; i-- {
			if it := &e.items[i]; it.kind == outCallStart && it.call == o.index {
				e.delta(i, o.text)
				break
			}
		}
	}
	return e.err
}

// event starts an SSE event: "event: NAME\ndata: {"type":NAME,"sequence_number":N".
func (e *responsesEncoder) event(name string) []byte {
	b := append(e.buf[:0], "event: "...)
	b = append(b, name...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, name...)
	b = append(b, `","sequence_number":`...)
	b = appendInt(b, e.seq)
	e.seq++
	return b
}

func (e *responsesEncoder) send(b []byte) {
	e.buf = b
	if e.err != nil || e.w == nil {
		return
	}
	if _, err := e.w.Write(b); err != nil {
		e.err = err
		return
	}
	e.err = e.w.Flush()
}

func (e *responsesEncoder) appendItemRef(b []byte, i int) []byte {
	b = append(b, `,"item_id":`...)
	b = appendString(b, e.items[i].id)
	b = append(b, `,"output_index":`...)
	return appendInt(b, int64(i))
}

// open closes the last item and starts it.
func (e *responsesEncoder) open(it respItem) {
	e.closeLast()
	e.items = append(e.items, respItem{kind: it.kind, id: it.id, callID: it.callID, name: it.name, call: it.call})
	if e.w == nil {
		return
	}
	i := len(e.items) - 1
	b := e.event("response.output_item.added")
	b = append(b, `,"output_index":`...)
	b = appendInt(b, int64(i))
	b = append(b, `,"item":`...)
	b = e.appendItem(b, i, false)
	b = append(b, "}\n\n"...)
	if it.kind != outCallStart {
		e.send(b)
		b = e.event("response.content_part.added")
		b = e.appendItemRef(b, i)
		b = append(b, `,"content_index":0,"part":`...)
		b = appendPart(b, it.kind, "")
		b = append(b, "}\n\n"...)
	}
	e.send(b)
}

func appendPart(b []byte, kind outKind, text string) []byte {
	if kind == outReasoning {
		b = append(b, `{"type":"reasoning_text","text":`...)
		b = appendString(b, text)
		return append(b, '}')
	}
	b = append(b, `{"type":"output_text","text":`...)
	b = appendString(b, text)
	return append(b, `,"annotations":[],"logprobs":[]}`...)
}

// delta adds text to item i and streams it.
func (e *responsesEncoder) delta(i int, text string) {
	it := &e.items[i]
	it.text.WriteString(text)
	if e.w == nil || text == "" {
		return
	}
	var b []byte
	switch it.kind {
	case outContent:
		b = e.event("response.output_text.delta")
		b = e.appendItemRef(b, i)
		b = append(b, `,"content_index":0,"logprobs":[],"delta":`...)
	case outReasoning:
		b = e.event("response.reasoning_text.delta")
		b = e.appendItemRef(b, i)
		b = append(b, `,"content_index":0,"delta":`...)
	default:
		b = e.event("response.function_call_arguments.delta")
		b = e.appendItemRef(b, i)
		b = append(b, `,"delta":`...)
	}
	b = appendString(b, text)
	e.send(append(b, "}\n\n"...))
}

// closeLast sends the .done events of the last item.
func (e *responsesEncoder) closeLast() {
	i := len(e.items) - 1
	if e.w == nil || i < 0 {
		return
	}
	it := &e.items[i]
	text := it.text.String()
	var b []byte
	switch it.kind {
	case outCallStart:
		b = e.event("response.function_call_arguments.done")
		b = e.appendItemRef(b, i)
		b = append(b, `,"name":`...)
		b = appendString(b, it.name)
		b = append(b, `,"arguments":`...)
		b = appendString(b, callArgs(text))
		e.send(append(b, "}\n\n"...))
	default:
		name := "response.output_text.done"
		if it.kind == outReasoning {
			name = "response.reasoning_text.done"
		}
		b = e.event(name)
		b = e.appendItemRef(b, i)
		b = append(b, `,"content_index":0,"text":`...)
		b = appendString(b, text)
		if it.kind == outContent {
			b = append(b, `,"logprobs":[]`...)
		}
		e.send(append(b, "}\n\n"...))
		b = e.event("response.content_part.done")
		b = e.appendItemRef(b, i)
		b = append(b, `,"content_index":0,"part":`...)
		b = appendPart(b, it.kind, text)
		e.send(append(b, "}\n\n"...))
	}
	b = e.event("response.output_item.done")
	b = append(b, `,"output_index":`...)
	b = appendInt(b, int64(i))
	b = append(b, `,"item":`...)
	b = e.appendItem(b, i, true)
	e.send(append(b, "}\n\n"...))
}

// callArgs is the arguments string of a call ("{}" for none).
func callArgs(text string) string {
	if strings.TrimSpace(text) == "" {
		return "{}"
	}
	return text
}

// appendItem appends output item i, in progress (no content yet) or done.
func (e *responsesEncoder) appendItem(b []byte, i int, done bool) []byte {
	it := &e.items[i]
	status := `"in_progress"`
	if done {
		status = `"completed"`
	}
	b = append(b, `{"id":`...)
	b = appendString(b, it.id)
	switch it.kind {
	case outReasoning:
		b = append(b, `,"type":"reasoning","summary":[],"content":[`...)
		if done {
			b = appendPart(b, outReasoning, it.text.String())
		}
		b = append(b, "]"...)
	case outContent:
		b = append(b, `,"type":"message","status":`...)
		b = append(b, status...)
		b = append(b, `,"role":"assistant","content":[`...)
		if done {
			b = appendPart(b, outContent, it.text.String())
		}
		b = append(b, "]"...)
	default:
		b = append(b, `,"type":"function_call","status":`...)
		b = append(b, status...)
		b = append(b, `,"call_id":`...)
		b = appendString(b, it.callID)
		b = append(b, `,"name":`...)
		b = appendString(b, it.name)
		b = append(b, `,"arguments":`...)
		if done {
			b = appendString(b, callArgs(it.text.String()))
		} else {
			b = append(b, `""`...)
		}
	}
	return append(b, '}')
}

// responseStatus is the response's status for a result (nil: running).
func responseStatus(res *result) string {
	switch {
	case res == nil:
		return "in_progress"
	case res.finish == "error":
		return "failed"
	case res.finish == "length" || res.finish == "cancelled":
		return "incomplete"
	}
	return "completed"
}

// appendResponse appends the response object; res nil: the generation is
// still running (response.created / response.in_progress).
func (e *responsesEncoder) appendResponse(b []byte, res *result) []byte {
	r := e.req
	status := responseStatus(res)
	b = append(b, `{"id":`...)
	b = appendString(b, e.id)
	b = append(b, `,"object":"response","created_at":`...)
	b = appendInt(b, e.created)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","error":`...)
	if status == "failed" {
		b = append(b, `{"code":"server_error","message":`...)
		b = appendString(b, engineError(res).Message)
		b = append(b, '}')
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"incomplete_details":`...)
	if status == "incomplete" {
		b = append(b, `{"reason":"max_output_tokens"}`...)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"instructions":`...)
	if r.hasInstr {
		b = appendString(b, r.instructions)
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"max_output_tokens":`...)
	if r.maxOutput >= 0 {
		b = appendInt(b, int64(r.maxOutput))
	} else {
		b = append(b, "null"...)
	}
	b = append(b, `,"model":`...)
	b = appendString(b, e.model)
	b = append(b, `,"output":[`...)
	if res != nil {
		for i := range e.items {
			if i > 0 {
				b = append(b, ',')
			}
			b = e.appendItem(b, i, true)
		}
	}
	b = append(b, `],"parallel_tool_calls":`...)
	b = appendBool(b, r.chat.parallelToolCalls)
	b = append(b, `,"previous_response_id":`...)
	b = appendNullableString(b, r.previousID)
	b = append(b, `,"reasoning":{"effort":`...)
	b = appendNullableString(b, r.effort)
	b = append(b, `,"summary":null},"store":`...)
	b = appendBool(b, r.store)
	b = append(b, `,"temperature":`...)
	b = appendOptFloat(b, r.chat.gen.temperature)
	b = append(b, `,"text":{"format":`...)
	b = appendRawOr(b, r.formatRaw, `{"type":"text"}`)
	b = append(b, `},"tool_choice":`...)
	b = appendRawOr(b, r.toolChoiceRaw, `"auto"`)
	b = append(b, `,"tools":`...)
	b = appendRawOr(b, r.toolsRaw, "[]")
	b = append(b, `,"top_p":`...)
	b = appendOptFloat(b, r.chat.gen.topP)
	b = append(b, `,"truncation":"disabled","metadata":`...)
	b = appendRawOr(b, r.metadataRaw, "{}")
	b = append(b, `,"usage":`...)
	if res == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"input_tokens":`...)
		b = appendInt(b, int64(res.promptTokens))
		b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
		b = appendInt(b, int64(res.cached))
		b = append(b, `},"output_tokens":`...)
		b = appendInt(b, int64(res.completionTokens))
		b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
		b = appendInt(b, int64(e.reasoningTokens()))
		b = append(b, `},"total_tokens":`...)
		b = appendInt(b, int64(res.promptTokens+res.completionTokens))
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, "true"...)
	}
	return append(b, "false"...)
}

func appendOptFloat(b []byte, v *float64) []byte {
	if v == nil {
		return append(b, "null"...)
	}
	return appendFloat(b, *v, 64)
}

func appendRawOr(b []byte, raw, def string) []byte {
	if raw == "" {
		return append(b, def...)
	}
	return append(b, raw...)
}

// start sends response.created and response.in_progress.
func (e *responsesEncoder) start() {
	b := e.event("response.created")
	b = append(b, `,"response":`...)
	b = e.appendResponse(b, nil)
	b = append(b, "}\n\n"...)
	e.send(b)
	b = e.event("response.in_progress")
	b = append(b, `,"response":`...)
	b = e.appendResponse(b, nil)
	e.send(append(b, "}\n\n"...))
}

// end closes the last item and sends response.completed, .incomplete or
// .failed with the final response object (also returned, for the store).
func (e *responsesEncoder) end(res *result) []byte {
	if res.finish != "error" {
		e.closeLast()
	}
	final := e.appendResponse(nil, res)
	if e.beforeFinal != nil {
		e.beforeFinal(final)
	}
	b := e.event("response." + responseStatus(res))
	b = append(b, `,"response":`...)
	b = append(b, final...)
	e.send(append(b, "}\n\n"...))
	return final
}

// conversation is the output as chat messages (one assistant message).
func (e *responsesEncoder) conversation() []convMsg {
	m := convMsg{role: "assistant"}
	for i := range e.items {
		it := &e.items[i]
		switch it.kind {
		case outContent:
			m.content += it.text.String()
		case outReasoning:
			m.reasoning += it.text.String()
		default:
			m.calls = append(m.calls, convCall{id: it.callID, name: it.name, args: it.text.String()})
		}
	}
	return []convMsg{m}
}

// reasoningTokens counts the reasoning output's tokens (re-encoded once at
// the end: the pipeline does not count tokens per output kind).
func (e *responsesEncoder) reasoningTokens() int {
	if e.s == nil || e.s.eng == nil || e.s.eng.Tokenizer == nil {
		return 0
	}
	n := 0
	for i := range e.items {
		if it := &e.items[i]; it.kind == outReasoning {
			n += len(e.s.eng.Tokenizer.Encode(it.text.String()))
		}
	}
	return n
}
