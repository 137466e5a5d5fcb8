// Package toolcall extracts tool calls from the text a Qwen model generates,
// either from a whole reply (Parse) or incrementally while it streams (Parser).
//
// Two call syntaxes are understood, both wrapped in <tool_call>…</tool_call>:
//
//   - JSON (Qwen3, Hermes style): {"name": "f", "arguments": {...}}
//   - XML (Qwen3-Coder, Qwen3.5):
//     <function=f>\n<parameter=p>\nvalue\n</parameter>\n…</function>
//
// Whatever the Format, both bodies are accepted inside <tool_call>; the Format
// only decides which opener-less form is also recognised (see below).
//
// # Output
//
// Content is the reply with the calls cut out. Whitespace that only separates
// calls from each other, from the start of the reply, or from the end of the
// reply is dropped: a run of whitespace directly before a call is dropped, and
// a run directly after a call is dropped when another call or the end of the
// reply follows it (when text follows it, it is kept). A reply without calls
// comes back as content byte for byte.
//
// A Call has the function name and its arguments as a compact JSON object
// text, keys in the order the model wrote them. Call ids are the server's job.
//
// # Where a call is recognised
//
//   - <tool_call> anywhere in the text, except inside a Markdown code fence
//     (a line starting with ``` or ~~~, closed by a line of at least as many of
//     the same character) or inside an inline code span (an odd number of
//     backtick runs earlier on the same line).
//   - FormatXML: <function=NAME> (or the damaged <function name="NAME">) at the
//     start of a line, without <tool_call> before it.
//   - FormatJSON: a line starting with {"name" whose object is followed, after
//     optional whitespace, by </tool_call> (the opener was dropped).
//
// A candidate that turns out not to be a call (undeclared function when a tool
// list was given, malformed JSON, an opener followed by something else) stays
// text, and the text after its first byte is examined again, so a real call
// that follows is still found.
//
// # JSON calls
//
// The body must be one JSON object with a non-empty string "name" and
// "arguments" (or "parameters") that is an object, a string holding a JSON
// object, null, or absent (→ {}); after it, whitespace and </tool_call>, which
// may be missing when the call had an opener. Stray '}' right before
// </tool_call> are tolerated. Anything else is text. Arguments are compacted
// with their keys, numbers and escapes as written. A JSON call is buffered
// until it is complete, so its arguments arrive as one CallArgs.
//
// # XML calls
//
// A call is committed once its header <function=NAME> is complete and
// followed by a newline (or '<', or the end); NAME must be declared when a
// tool list is given. From then on the text up to </function> (and an
// optional </tool_call>) is read as parameters; the call also ends at
// </tool_call> (no </function>), at a new <tool_call> or <function=, at
// stray text between parameters (which is then content), or at the end of
// the reply (a truncated call keeps what it had).
//
// A parameter opener is <parameter=P>, or damaged as <parameter name="P">,
// <parameter="P"> or <parameter=P without '>' (the newline ends it). Its
// value starts after the opener; one leading and one trailing newline are
// removed (the template adds them). The value ends at a closing tag that is
// followed by structure, so that code containing such tags stays intact:
//
//   - </parameter> followed (after whitespace) by <parameter=, <parameter ,
//     </function>, </tool_call>, <tool_call>, <function=, or the end;
//   - </function> followed by </tool_call>, <tool_call>, <function=, or the end;
//   - </tool_call> followed by <tool_call>, <function=, or the end.
//
// Anywhere else those tags are part of the value. Values are converted to the
// JSON type the tool's schema declares for the parameter
// (parameters.properties.P.type, a list of types, or the types in anyOf/oneOf):
// integer, number, boolean (true/false in any case), null (null or None),
// object and array (valid JSON, compacted). A value that does not convert, a
// string parameter, or an unknown parameter is a JSON string. String values
// stream as they arrive; typed values arrive when complete.
package toolcall

import (
	"encoding/json"
	"strings"
)

// Format names the tool-call syntax a model was trained on.
type Format int

const (
	// FormatJSON is the Qwen3/Hermes syntax: a JSON object in <tool_call>.
	FormatJSON Format = iota
	// FormatXML is the Qwen3-Coder/Qwen3.5 syntax: <function=…><parameter=…>.
	FormatXML
)

// String returns "json" or "xml".
func (f Format) String() string {
	if f == FormatXML {
		return "xml"
	}
	return "json"
}

// FormatFromTemplate returns FormatXML when the chat template renders calls
// as <function=NAME> (Qwen3-Coder, Qwen3.5), otherwise FormatJSON.
func FormatFromTemplate(chatTemplate string) Format {
	if strings.Contains(chatTemplate, "<function=") {
		return FormatXML
	}
	return FormatJSON
}

// Tool is a function the request declared. Parameters is its JSON schema
// (an object schema with "properties"); it may be empty.
type Tool struct {
	Name       string
	Parameters json.RawMessage
}

// Call is one parsed tool call. Arguments is a compact JSON object text.
type Call struct {
	Name      string
	Arguments string
}

// Parse splits a complete reply into content and calls. It gives exactly what
// a Parser fed the same text in any pieces gives. tools limits the accepted
// function names when it is non-empty and supplies the parameter types.
func Parse(f Format, text string, tools []Tool) (content string, calls []Call) {
	p := NewParser(f, tools)
	var b strings.Builder
	collect := func(evs []Event) {
		for _, e := range evs {
			switch e.Kind {
			case Content:
				b.WriteString(e.Text)
			case CallStart:
				calls = append(calls, Call{Name: e.Name})
			case CallArgs:
				calls[e.Index].Arguments += e.ArgsDelta
			}
		}
	}
	collect(p.Feed(text))
	collect(p.Finish())
	return b.String(), calls
}
