package script

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine/toolcall"
	"github.com/infernix/infernix/server"
)

// corpusCase is one case of engine/toolcall's corpus files.
type corpusCase struct {
	Name   string          `json:"name"`
	Format string          `json:"format"`
	Tools  *string         `json:"tools"`
	Input  json.RawMessage `json:"input"` // a string or a list of chunks
}

type corpusFile struct {
	Tools map[string][]struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"tools"`
	Cases []corpusCase `json:"cases"`
}

func (c *corpusCase) input(t *testing.T) string {
	var s string
	if json.Unmarshal(c.Input, &s) == nil {
		return s
	}
	var parts []string
	if err := json.Unmarshal(c.Input, &parts); err != nil {
		t.Fatalf("%s: input: %v", c.Name, err)
	}
	for _, p := range parts {
		s += p
	}
	return s
}

// xmlCorpus runs every xml case of the built-in parser's corpus through
// the shipped Starlark parser and the Go parser and returns the names of
// the cases where they differ.
func xmlCorpus(t *testing.T, e *Engine, file string) (n int, differ []string) {
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var f corpusFile
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Cases {
		if c.Format != "xml" {
			continue
		}
		var tools []toolcall.Tool
		if c.Tools != nil {
			for _, tl := range f.Tools[*c.Tools] {
				tools = append(tools, toolcall.Tool{Name: tl.Name, Parameters: tl.Parameters})
			}
		}
		in := c.input(t)
		wantContent, wantCalls := toolcall.Parse(toolcall.FormatXML, in, tools)
		calls, content, err := e.ParseToolCalls(in, tools)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		n++
		// The streaming form, fed byte by byte and in larger pieces, gives
		// exactly the batch form's output.
		for _, size := range []int{1, 3, 7, 64} {
			sc, scalls, err := streamParse(e, in, tools, size)
			if err != nil {
				t.Errorf("%s: stream by %d: %v", c.Name, size, err)
				continue
			}
			if sc != content || !sameCalls(scalls, calls) {
				t.Errorf("%s: stream by %d:\n %q %+v\nbatch\n %q %+v", c.Name, size, sc, scalls, content, calls)
			}
		}
		same := content == wantContent && len(calls) == len(wantCalls)
		for i := 0; same && i < len(calls); i++ {
			same = calls[i] == wantCalls[i]
		}
		if !same {
			differ = append(differ, c.Name)
			t.Logf("%s:\n star %q %+v\n   go %q %+v", c.Name, content, calls, wantContent, wantCalls)
		}
	}
	return n, differ
}

// TestXMLCorpus: the shipped Starlark parser gives the built-in parser's
// content and calls, byte for byte, on every case the real chat templates
// rendered and on every hand-written case, damaged-call recoveries included.
func TestXMLCorpus(t *testing.T) {
	e := load(t, "../scripts/hooks", Options{})
	for _, file := range []string{"../engine/toolcall/testdata/rendered.json", "../engine/toolcall/testdata/corpus.json"} {
		n, differ := xmlCorpus(t, e, file)
		if n < 20 {
			t.Errorf("%s: only %d xml cases", file, n)
		}
		for _, name := range differ {
			t.Errorf("%s: %s: the Starlark parser differs from the built-in one", file, name)
		}
		t.Logf("%s: %d xml cases", file, n)
	}
}

// FuzzXMLParser: on any reply the shipped parser returns, never raises
// (a script error would fail the request), gives the built-in parser's
// content and calls, and its streaming form gives the same output.
func FuzzXMLParser(f *testing.F) {
	e := load(f, "../scripts/hooks", Options{})
	f.Add("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n 5.0 \n</parameter>\n</function>\n</tool_call>")
	f.Add("text <tool_call><function=x><parameter=a>{\"b\": [1,</parameter></function></tool_call> more")
	f.Add("<tool_call>\n<function=get_weather>\n<parameter=days>\n1e999\n</parameter>")
	// Numbers at float64's edges: zero with any exponent, underflow, the
	// largest value and the first that overflows.
	for _, v := range []string{"0e999", "1e-999", "5e0005", "1.7976931348623158e308", "1.797693134862315808e308", "179769313486231580793728971405303415079934132710037826936173778980444968292764750946649017977587207096330286416692887910946555547851940402630657488671505820681908902000708383676273854845817711531764475730270069855571366959622842914819860834936475292719074168444365510704342711559699508093042880177904174497791"} {
		f.Add("<tool_call>\n<function=get_weather>\n<parameter=days>\n" + v + "\n</parameter>")
	}
	tools := []toolcall.Tool{{Name: "get_weather", Parameters: []byte(`{"properties":{"city":{"type":"string"},"days":{"type":["integer","null"]},"o":{"type":"object"},"n":{"type":"number"},"b":{"type":"boolean"}}}`)}}
	f.Fuzz(func(t *testing.T, text string) {
		for _, ts := range [][]toolcall.Tool{nil, tools} {
			calls, content, err := e.ParseToolCalls(text, ts)
			if err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			sc, scalls, err := streamParse(e, text, ts, 1+len(text)%5)
			if err != nil || sc != content || !sameCalls(scalls, calls) {
				t.Fatalf("%q: streamed %q %+v %v, batch %q %+v", text, sc, scalls, err, content, calls)
			}
			for _, c := range calls {
				var m map[string]any
				if json.Unmarshal([]byte(c.Arguments), &m) != nil {
					t.Fatalf("%q: arguments %s", text, c.Arguments)
				}
			}
			if wc, wcalls := toolcall.Parse(toolcall.FormatXML, text, ts); wc != content || !sameCalls(wcalls, calls) {
				t.Fatalf("%q: star %q %+v, go %q %+v", text, content, calls, wc, wcalls)
			}
		}
	})
}

// TestXMLRandomReplies compares the shipped parser with the built-in one on
// random replies made of tags, damaged tags, fences, JSON and text, and
// checks that its streaming form gives its batch output.
func TestXMLRandomReplies(t *testing.T) {
	e := load(t, "../scripts/hooks", Options{})
	pieces := []string{"<tool_call>", "</tool_call>", "<function=get_weather>", "<function=get_weather",
		"<function name=\"write_file\">", "<function=nope>", "<parameter=city>", "<parameter=days>",
		"<parameter name=\"content\">", "<parameter=city", "</parameter>", "</function>", "\n", "\n", " ", "\t",
		"\r\n", "```", "```xml", "~~~", "~~~~", "`", "{", "}", "<", "<tool_", "</para", "<function", "<parameter=",
		`{"name": "get_weather", "arguments": {"city": "Par\u00eds", "days": 1.50}}`, `{"name": "nope"}`,
		`{"name": "write_file", "arguments": "{\"path\": \"a\"}"}`, "Paris", "3", "+5", ".5", "1e3", "true", "None",
		"text", `"`, `\`, "\x01", "[1, 2]", `{"a": 1}`}
	tools := []toolcall.Tool{
		{Name: "get_weather", Parameters: []byte(`{"properties":{"city":{"type":"string"},"days":{"type":["integer","null"]}}}`)},
		{Name: "write_file", Parameters: []byte(`{"properties":{"content":{"type":["number","boolean","array","object"]}}}`)},
	}
	rng := rand.New(rand.NewSource(1))
	for n := 0; n < 3000; n++ {
		var sb strings.Builder
		for range 1 + rng.Intn(24) {
			sb.WriteString(pieces[rng.Intn(len(pieces))])
		}
		text := sb.String()
		for _, ts := range [][]toolcall.Tool{nil, tools} {
			calls, content, err := e.ParseToolCalls(text, ts)
			if err != nil {
				t.Fatalf("%q: %v", text, err)
			}
			if wc, wcalls := toolcall.Parse(toolcall.FormatXML, text, ts); wc != content || !sameCalls(wcalls, calls) {
				t.Fatalf("%q (%d tools):\n star %q %+v\n   go %q %+v", text, len(ts), content, calls, wc, wcalls)
			}
			sc, scalls, err := streamParse(e, text, ts, 1+n%7)
			if err != nil || sc != content || !sameCalls(scalls, calls) {
				t.Fatalf("%q: streamed %q %+v %v, batch %q %+v", text, sc, scalls, err, content, calls)
			}
		}
	}
}

// streamParse feeds text to stream_tool_calls in pieces of size bytes.
func streamParse(e *Engine, text string, tools []toolcall.Tool, size int) (string, []toolcall.Call, error) {
	st := e.NewToolCallStream(tools)
	var content string
	var calls []toolcall.Call
	collect := func(ps []server.ToolPiece) {
		for _, p := range ps {
			if p.Call != nil {
				calls = append(calls, *p.Call)
			} else {
				content += p.Content
			}
		}
	}
	for i := 0; i < len(text); i += size {
		ps, err := st.Feed(text[i:min(i+size, len(text))], false)
		if err != nil {
			return "", nil, err
		}
		collect(ps)
	}
	ps, err := st.Feed("", true)
	if err != nil {
		return "", nil, err
	}
	collect(ps)
	return content, calls, nil
}

func sameCalls(a, b []toolcall.Call) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestXMLLongReplies: long replies full of the bytes the parser looks at
// twice ('<' in markup and code, newlines) parse within the default step
// limit, batch and streamed, as the built-in parser parses them.
func TestXMLLongReplies(t *testing.T) {
	e := load(t, "../scripts/hooks", Options{})
	var html, cpp, cmp strings.Builder
	for i := 0; html.Len() < 40<<10; i++ {
		fmt.Fprintf(&html, "<tr><td class=\"c%d\">%d</td><td><a href=\"/t/%d\">item</a></td></tr>\n", i%7, i, i)
	}
	for i := 0; cpp.Len() < 130<<10; i++ {
		fmt.Fprintf(&cpp, "for (int i%d = 0; i%d < n && v[i%d] <= lim; ++i%d) { std::vector<int> w; w.push_back(i%d << 1); }\n", i, i, i, i, i)
	}
	for cmp.Len() < 20<<10 {
		cmp.WriteString("a < b\n")
	}
	call := "\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"
	tools := []toolcall.Tool{{Name: "get_weather", Parameters: []byte(`{"properties":{"city":{"type":"string"}}}`)}}
	for _, tc := range []struct {
		name, text string
		calls      int
	}{
		{"html", html.String(), 0},
		{"c++", cpp.String(), 0},
		{"comparisons", cmp.String(), 0},
		{"html then a call", html.String() + call, 1},
		{"c++ in a fence, then a call", "```cpp\n" + cpp.String() + "```" + call, 1},
	} {
		calls, content, err := e.ParseToolCalls(tc.text, tools)
		if err != nil {
			t.Errorf("%s (%d KB): %v", tc.name, len(tc.text)>>10, err)
			continue
		}
		wc, wcalls := toolcall.Parse(toolcall.FormatXML, tc.text, tools)
		if content != wc || !sameCalls(calls, wcalls) || len(calls) != tc.calls {
			t.Errorf("%s: %d calls, content of %d bytes; the built-in parser: %d calls, %d bytes", tc.name, len(calls), len(content), len(wcalls), len(wc))
		}
		sc, scalls, err := streamParse(e, tc.text, tools, 64)
		if err != nil || sc != content || !sameCalls(scalls, calls) {
			t.Errorf("%s: streamed in 64-byte pieces: %d calls, %d bytes, %v", tc.name, len(scalls), len(sc), err)
		}
	}
}
