package script

import (
	"fmt"

	"go.starlark.net/starlark"

	"github.com/infernix/infernix/engine/toolcall"
	"github.com/infernix/infernix/server"
)

var _ server.ToolCallStreamer = (*Engine)(nil)

// StreamsToolCalls reports whether stream_tool_calls is defined for format.
func (e *Engine) StreamsToolCalls(format string) bool {
	return e.Has("stream_tool_calls") && e.Handles(format)
}

// NewToolCallStream starts parsing one streamed reply with
// stream_tool_calls(state, chunk, tools): state is a dict the script keeps
// between calls (private to this reply), chunk the next text or None at
// the end; it returns a list of {"content": text} and call dicts.
func (e *Engine) NewToolCallStream(tools []toolcall.Tool) server.ToolCallStream {
	return &toolStream{e: e, state: starlark.NewDict(4), tools: toolsValue(tools)}
}

type toolStream struct {
	e     *Engine
	state *starlark.Dict
	tools starlark.Value
}

func (s *toolStream) Feed(chunk string, final bool) ([]server.ToolPiece, error) {
	var c starlark.Value = starlark.String(chunk)
	if final {
		c = starlark.None
	}
	v, h, ok, err := s.e.call("stream_tool_calls", s.state, c, s.tools)
	if !ok {
		return nil, fmt.Errorf("stream_tool_calls is no longer defined (the scripts were reloaded)")
	}
	if err != nil {
		return nil, err
	}
	it, isIter := v.(starlark.Iterable)
	if !isIter || v.Type() == "string" || v.Type() == "dict" {
		return nil, s.e.badReturn("stream_tool_calls", h, "%s, want a list of {\"content\": …} and call dicts", v.Type())
	}
	var out []server.ToolPiece
	iter := it.Iterate()
	defer iter.Done()
	var x starlark.Value
	for i := 0; iter.Next(&x); i++ {
		d, isDict := x.(*starlark.Dict)
		if !isDict {
			return nil, s.e.badReturn("stream_tool_calls", h, "item %d of type %s, want a dict", i, x.Type())
		}
		if cv, found, _ := d.Get(starlark.String("content")); found {
			text, isStr := starlark.AsString(cv)
			if !isStr || d.Len() != 1 {
				return nil, s.e.badReturn("stream_tool_calls", h, "item %d: {\"content\": …} must hold one string", i)
			}
			out = append(out, server.ToolPiece{Content: text})
			continue
		}
		calls, cerr := decodeCalls(starlark.NewList([]starlark.Value{d}))
		if cerr != nil {
			return nil, s.e.badReturn("stream_tool_calls", h, "item %d: %v", i, cerr)
		}
		out = append(out, server.ToolPiece{Call: &calls[0]})
	}
	return out, nil
}
