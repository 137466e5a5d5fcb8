package server

import (
	"bufio"
	"hash/fnv"
	"strings"

	"github.com/tidwall/gjson"
)

// anthropicEncoder writes Anthropic Messages responses: whole (collect,
// then appendMessage) or as Anthropic's SSE events (start, emit, end). In
// both modes it keeps the content blocks, in order: thinking, text and
// tool_use blocks, a new block whenever the kind of output changes.
type anthropicEncoder struct {
	s      *Server
	id     string
	model  string
	blocks []anthBlock
	// keepSpace keeps the whitespace a text block starts with (a prefill's
	// continuation, where it joins the prefill's words).
	keepSpace bool

	w   *bufio.Writer // nil: not streaming
	buf []byte
	err error
}

type anthBlock struct {
	kind     outKind // outContent (text), outReasoning (thinking) or outCallStart (tool_use)
	text     strings.Builder
	id, name string
	call     int // the pipeline's call index
}

// signature is the thinking block's signature: opaque to clients, which
// send it back with the block; a hash of the text stands in for
// Anthropic's encrypted one (the Qwen templates drop old thinking anyway).
func signature(text string) string {
	h := fnv.New64a()
	h.Write([]byte(text))
	return "infernix-" + string(appendHex(nil, h.Sum64()))
}

func appendHex(b []byte, v uint64) []byte {
	for i := 60; i >= 0; i -= 4 {
		b = append(b, hexDigits[(v>>uint(i))&0xf])
	}
	return b
}

// toolUseID turns the pipeline's call id (call_…) into Anthropic's form.
func toolUseID(callID string) string {
	return "toolu_" + strings.TrimPrefix(callID, "call_")
}

// emit takes one output (the generation's emit callback).
func (e *anthropicEncoder) emit(o *output) error {
	n := len(e.blocks)
	switch o.kind {
	case outContent, outReasoning:
		if n == 0 || e.blocks[n-1].kind != o.kind {
			text := o.text
			if o.kind == outContent && !(e.keepSpace && n == 0) {
				// A new text block does not start with the blank lines a
				// model writes after its thinking or between calls.
				if text = strings.TrimLeft(text, " \t\r\n"); text == "" {
					return nil
				}
			}
			e.open(anthBlock{kind: o.kind})
			n++
			e.delta(&e.blocks[n-1], text)
			break
		}
		e.delta(&e.blocks[n-1], o.text)
	case outCallStart:
		e.open(anthBlock{kind: outCallStart, id: toolUseID(o.id), name: o.name, call: o.index})
	case outCallArgs:
		for i := n - 1; i >= 0; i-- {
			if b := &e.blocks[i]; b.kind == outCallStart && b.call == o.index {
				e.delta(b, o.text)
				break
			}
		}
	}
	return e.err
}

// open closes the current block and starts blk.
func (e *anthropicEncoder) open(blk anthBlock) {
	e.closeLast()
	e.blocks = append(e.blocks, anthBlock{kind: blk.kind, id: blk.id, name: blk.name, call: blk.call})
	if e.w == nil {
		return
	}
	b := e.event("content_block_start")
	b = append(b, `{"type":"content_block_start","index":`...)
	b = appendInt(b, int64(len(e.blocks)-1))
	b = append(b, `,"content_block":`...)
	switch blk.kind {
	case outContent:
		b = append(b, `{"type":"text","text":""}`...)
	case outReasoning:
		b = append(b, `{"type":"thinking","thinking":"","signature":""}`...)
	default:
		b = append(b, `{"type":"tool_use","id":`...)
		b = appendString(b, blk.id)
		b = append(b, `,"name":`...)
		b = appendString(b, blk.name)
		b = append(b, `,"input":{}}`...)
	}
	e.send(append(b, "}\n\n"...))
}

// delta adds text to blk (the last block) and streams it.
func (e *anthropicEncoder) delta(blk *anthBlock, text string) {
	blk.text.WriteString(text)
	if e.w == nil || text == "" {
		return
	}
	b := e.event("content_block_delta")
	b = append(b, `{"type":"content_block_delta","index":`...)
	b = appendInt(b, int64(len(e.blocks)-1))
	switch blk.kind {
	case outContent:
		b = append(b, `,"delta":{"type":"text_delta","text":`...)
	case outReasoning:
		b = append(b, `,"delta":{"type":"thinking_delta","thinking":`...)
	default:
		b = append(b, `,"delta":{"type":"input_json_delta","partial_json":`...)
	}
	b = appendString(b, text)
	e.send(append(b, "}}\n\n"...))
}

// closeLast ends the open block: a thinking block gets its signature.
func (e *anthropicEncoder) closeLast() {
	n := len(e.blocks)
	if e.w == nil || n == 0 {
		return
	}
	if blk := &e.blocks[n-1]; blk.kind == outReasoning {
		b := e.event("content_block_delta")
		b = append(b, `{"type":"content_block_delta","index":`...)
		b = appendInt(b, int64(n-1))
		b = append(b, `,"delta":{"type":"signature_delta","signature":`...)
		b = appendString(b, signature(blk.text.String()))
		e.send(append(b, "}}\n\n"...))
	}
	b := e.event("content_block_stop")
	b = append(b, `{"type":"content_block_stop","index":`...)
	b = appendInt(b, int64(n-1))
	e.send(append(b, "}\n\n"...))
}

// event starts an SSE event in the reused buffer.
func (e *anthropicEncoder) event(name string) []byte {
	b := append(e.buf[:0], "event: "...)
	b = append(b, name...)
	return append(b, "\ndata: "...)
}

func (e *anthropicEncoder) send(b []byte) {
	e.buf = b
	if e.err != nil {
		return
	}
	if _, err := e.w.Write(b); err != nil {
		e.err = err
		return
	}
	e.err = e.w.Flush()
}

// start sends message_start and a ping.
func (e *anthropicEncoder) start(promptTokens int) {
	b := e.event("message_start")
	b = append(b, `{"type":"message_start","message":`...)
	b = e.appendHead(b)
	b = append(b, `"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`...)
	b = appendInt(b, int64(promptTokens))
	b = append(b, `,"output_tokens":0}}}`+"\n\n"...)
	b = append(b, "event: ping\ndata: {\"type\":\"ping\"}\n\n"...)
	e.send(b)
}

// end closes the last block and sends message_delta and message_stop, or
// an error event when the engine failed.
func (e *anthropicEncoder) end(res *result) {
	if res.finish == "error" {
		b := e.event("error")
		b = appendAnthropicError(b, engineError(res))
		e.send(append(b, "\n\n"...))
		return
	}
	e.closeLast()
	b := e.event("message_delta")
	b = append(b, `{"type":"message_delta","delta":{`...)
	b = appendStopReason(b, res)
	b = append(b, `},"usage":`...)
	b = appendAnthropicUsage(b, res)
	b = append(b, "}\n\nevent: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
	e.send(b)
}

func (e *anthropicEncoder) appendHead(b []byte) []byte {
	b = append(b, `{"id":`...)
	b = appendString(b, e.id)
	b = append(b, `,"type":"message","role":"assistant","model":`...)
	b = appendString(b, e.model)
	return append(b, ',')
}

// appendMessage appends the whole (non-streaming) message.
func (e *anthropicEncoder) appendMessage(b []byte, res *result) []byte {
	b = e.appendHead(b)
	b = append(b, `"content":[`...)
	for i := range e.blocks {
		blk := &e.blocks[i]
		if i > 0 {
			b = append(b, ',')
		}
		text := blk.text.String()
		switch blk.kind {
		case outContent:
			b = append(b, `{"type":"text","text":`...)
			b = appendString(b, text)
		case outReasoning:
			b = append(b, `{"type":"thinking","thinking":`...)
			b = appendString(b, text)
			b = append(b, `,"signature":`...)
			b = appendString(b, signature(text))
		default:
			b = append(b, `{"type":"tool_use","id":`...)
			b = appendString(b, blk.id)
			b = append(b, `,"name":`...)
			b = appendString(b, blk.name)
			b = append(b, `,"input":`...)
			b = appendArgsObject(b, text)
		}
		b = append(b, '}')
	}
	b = append(b, "],"...)
	b = appendStopReason(b, res)
	b = append(b, `,"usage":`...)
	b = appendAnthropicUsage(b, res)
	return append(b, '}')
}

// appendArgsObject appends a call's arguments as a JSON object: the
// parser's text when it is one, else {} (a call cut by max_tokens).
func appendArgsObject(b []byte, args string) []byte {
	if r := gjson.Parse(args); gjson.Valid(args) && r.IsObject() {
		return append(b, args...)
	}
	return append(b, "{}"...)
}

// appendStopReason appends "stop_reason":…,"stop_sequence":….
func appendStopReason(b []byte, res *result) []byte {
	reason := "end_turn"
	switch {
	case res.stopString != "":
		reason = "stop_sequence"
	case res.finish == "tool_calls":
		reason = "tool_use"
	case res.finish == "length" || res.finish == "cancelled":
		reason = "max_tokens"
	}
	b = append(b, `"stop_reason":`...)
	b = appendString(b, reason)
	b = append(b, `,"stop_sequence":`...)
	return appendNullableString(b, res.stopString)
}

// appendAnthropicUsage: input_tokens excludes the tokens read from the
// prefix cache, as Anthropic counts them.
func appendAnthropicUsage(b []byte, res *result) []byte {
	b = append(b, `{"input_tokens":`...)
	b = appendInt(b, int64(res.promptTokens-res.cached))
	b = append(b, `,"cache_creation_input_tokens":0,"cache_read_input_tokens":`...)
	b = appendInt(b, int64(res.cached))
	b = append(b, `,"output_tokens":`...)
	b = appendInt(b, int64(res.completionTokens))
	return append(b, '}')
}
