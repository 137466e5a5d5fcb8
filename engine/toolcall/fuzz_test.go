package toolcall

import (
	"math/rand"
	"strings"
	"testing"
)

var fuzzTools = []Tool{
	{Name: "get_weather", Parameters: []byte(`{"properties":{"city":{"type":"string"},"days":{"type":"integer"}}}`)},
	{Name: "configure", Parameters: []byte(`{"properties":{"n":{"type":"number"},"b":{"type":"boolean"},"o":{"type":"object"},"a":{"type":["array","null"]}}}`)},
}

func addSeeds(f *testing.F, add func(string)) {
	f.Helper()
	for _, file := range []string{"testdata/corpus.json", "testdata/rendered.json"} {
		c, _ := loadCorpus(f, file)
		for _, x := range c.Cases {
			add(string(x.Input))
		}
	}
	for _, s := range []string{"", "<", "<tool_call>", "{", "\n{\"name\"", "```\n", "<function=get_weather>\n<parameter=days>\n1", "`", "</parameter>"} {
		add(s)
	}
}

// FuzzParse: no panic, arguments are JSON objects, and a reply in which no
// call was found comes back as content unchanged (nothing is lost).
func FuzzParse(f *testing.F) {
	addSeeds(f, func(s string) { f.Add(s, true, false); f.Add(s, false, true) })
	f.Fuzz(func(t *testing.T, in string, xml, withTools bool) {
		format := FormatJSON
		if xml {
			format = FormatXML
		}
		var tools []Tool
		if withTools {
			tools = fuzzTools
		}
		content, calls := Parse(format, in, tools)
		if err := checkArgs(calls); err != nil {
			t.Fatal(err)
		}
		if len(calls) == 0 && content != in {
			t.Fatalf("no calls but content changed:\n in %q\nout %q", in, content)
		}
		if len(content) > len(in) {
			t.Fatalf("content longer than input: %q", content)
		}
	})
}

// FuzzStream: any chunking gives exactly Parse's result, with well-ordered
// events and a drained parser.
func FuzzStream(f *testing.F) {
	addSeeds(f, func(s string) { f.Add(s, int64(len(s)), true) })
	f.Fuzz(func(t *testing.T, in string, seed int64, xml bool) {
		format := FormatJSON
		if xml {
			format = FormatXML
		}
		tools := fuzzTools
		if seed%3 == 0 {
			tools = nil
		}
		content, calls := Parse(format, in, tools)
		r := rand.New(rand.NewSource(seed))
		var chunks []string
		for rest := in; rest != ""; {
			n := 1 + r.Intn(8)
			if n > len(rest) {
				n = len(rest)
			}
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		for _, cs := range [][]string{chunks, chunkings(in, 0)["bytes"]} {
			got, err := stream(format, tools, cs)
			if err != nil {
				t.Fatal(err)
			}
			if got.content != content || !sameCalls(got.calls, calls) {
				t.Fatalf("streamed\n %q %+v\nparsed\n %q %+v", got.content, got.calls, content, calls)
			}
		}
	})
}

// xmlValueAmbiguous reports whether a string value, rendered by the template,
// holds a closing tag that the contract must take as the end: one followed,
// after whitespace, by what may follow it as structure (or a prefix of that,
// at the end of the value).
func xmlValueAmbiguous(v string) bool {
	follow := map[string][]string{
		"</parameter>": {"<parameter=", "<parameter ", "</function>", "</tool_call>", "<tool_call>", "<function=", "<function "},
		"</function>":  {"</tool_call>", "<tool_call>", "<function=", "<function "},
		"</tool_call>": {"<tool_call>", "<function=", "<function "},
	}
	for tag, fs := range follow {
		for i := strings.Index(v, tag); i >= 0; {
			rest := strings.TrimLeft(v[i+len(tag):], " \t\r\n")
			for _, f := range fs {
				if strings.HasPrefix(rest, f) || (rest != "" && strings.HasPrefix(f, rest)) {
					return true
				}
			}
			k := strings.Index(v[i+1:], tag)
			if k < 0 {
				break
			}
			i += 1 + k
		}
	}
	return false
}

// FuzzXMLValue: a string value the template renders
// ("<parameter=P>\n" + value + "\n</parameter>\n") comes back exactly, whole
// and byte by byte, unless it holds a closing tag followed by structure.
func FuzzXMLValue(f *testing.F) {
	for _, s := range []string{"Paris", "", "\n", "a\n\n", "a</parameter>", "</function>", "x\n</parameter>\nmore", "if a < b {\n}", "<tool_call>", "日本\n語"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		if xmlValueAmbiguous(v) {
			return
		}
		in := "<tool_call>\n<function=write_file>\n<parameter=content>\n" + v + "\n</parameter>\n<parameter=path>\nf\n</parameter>\n</function>\n</tool_call>"
		want := []Call{{Name: "write_file", Arguments: `{"content":` + string(appendString(nil, v)) + `,"path":"f"}`}}
		for how, chunks := range map[string][]string{"whole": {in}, "bytes": chunkings(in, 0)["bytes"]} {
			got, err := stream(FormatXML, streamTools, chunks)
			if err != nil || got.content != "" || !sameCalls(got.calls, want) {
				t.Fatalf("%s: %v\n got %q %+v\nwant %+v", how, err, got.content, got.calls, want)
			}
		}
	})
}
