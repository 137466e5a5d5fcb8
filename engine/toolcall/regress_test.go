package toolcall

import (
	"strings"
	"testing"
)

// checkAllChunkings checks that in parses to wantContent and wantCalls, and
// that every chunking checkChunkings tries gives the same.
func checkAllChunkings(t *testing.T, f Format, tools []Tool, in, wantContent string, wantCalls []Call) {
	t.Helper()
	content, calls := Parse(f, in, tools)
	if content != wantContent || !sameCalls(calls, wantCalls) {
		t.Fatalf("Parse(%q)\n got %q %+v\nwant %q %+v", in, content, calls, wantContent, wantCalls)
	}
	checkChunkings(t, f, tools, in)
}

// checkChunkings streams in whole, byte by byte, in random cuts, in every cut
// into two pieces, and in every cut into three pieces whose middle one is at
// most 12 bytes, so each tag is also split at both ends (for a long input, at
// a sample of the cut points). Every way must give what Parse gives, with
// well-ordered events.
func checkChunkings(t *testing.T, f Format, tools []Tool, in string) {
	t.Helper()
	content, calls := Parse(f, in, tools)
	if err := checkArgs(calls); err != nil {
		t.Fatalf("Parse(%q): %v", in, err)
	}
	step := 1
	if len(in) > 400 {
		step = len(in)/40 + 1 // long inputs: a sample of the cut points, to stay fast
	}
	for i := 0; i <= len(in); i += step {
		for j := i; j <= min(len(in), i+12); j++ {
			got, err := stream(f, tools, []string{in[:i], in[i:j], in[j:]})
			if err != nil || got.content != content || !sameCalls(got.calls, calls) {
				t.Fatalf("%q cut at %d,%d: %v\n got %q %+v\nwant %q %+v", in, i, j, err, got.content, got.calls, content, calls)
			}
		}
	}
	for how, chunks := range chunkings(in, int64(len(in))) {
		got, err := stream(f, tools, chunks)
		if err != nil || got.content != content || !sameCalls(got.calls, calls) {
			t.Fatalf("%q %s: %v\n got %q %+v\nwant %q %+v", in, how, err, got.content, got.calls, content, calls)
		}
	}
}

// TestValueEndingInClosingTag: a value whose own text ends with a closing tag
// (a file that documents the format, an XML snippet) is rendered by the
// template as value + "\n</parameter>"; the newline before the real closing
// tag is the template's and must be removed like any other, or the value
// gains a newline the model never meant.
func TestValueEndingInClosingTag(t *testing.T) {
	for _, v := range []string{
		"a</parameter>",
		"</parameter>",
		"a</parameter>\n",
		"a\n</parameter>",
		"</parameter>\n</parameter>",
		"end of doc</function>",
		"a\n</function>",
		"see </tool_call>",
		"x\n</parameter>\n\n",
	} {
		in := "<tool_call>\n<function=write_file>\n<parameter=content>\n" + v + "\n</parameter>\n<parameter=path>\nf.md\n</parameter>\n</function>\n</tool_call>"
		want := []Call{{Name: "write_file", Arguments: `{"content":` + string(appendString(nil, v)) + `,"path":"f.md"}`}}
		t.Run(v, func(t *testing.T) {
			checkAllChunkings(t, FormatXML, streamTools, in, "", want)
		})
	}
}

// TestJSONCallSizeLimit: a JSON call body longer than maxJSONCall stays text,
// whether it arrives whole or in pieces (the bound used to be checked only
// at the end of each piece, so a whole reply accepted what a stream refused).
func TestJSONCallSizeLimit(t *testing.T) {
	big := strings.Repeat("x", maxJSONCall+8192)
	in := "Writing.\n<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"content\": \"" + big + "\"}}\n</tool_call>"
	var pieces []string
	for rest := in; rest != ""; {
		n := min(len(rest), 4096)
		pieces, rest = append(pieces, rest[:n]), rest[n:]
	}
	for how, chunks := range map[string][]string{"whole": {in}, "4k": pieces} {
		got, err := stream(FormatJSON, streamTools, chunks)
		if err != nil {
			t.Fatalf("%s: %v", how, err)
		}
		if len(got.calls) != 0 || got.content != in {
			t.Errorf("%s: %d calls, content of %d bytes (input %d): an oversized call must stay text", how, len(got.calls), len(got.content), len(in))
		}
	}
}
