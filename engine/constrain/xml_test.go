package constrain

import (
	"strings"
	"testing"
)

func TestToolCallXML(t *testing.T) {
	tools := []Tool{
		{Name: "get_weather", Parameters: []byte(`{"type":"object","properties":{"city":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","unit"]}`)},
		{Name: "set", Parameters: []byte(`{"type":"object","properties":{"on":{"type":"boolean"},"opts":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},"tags":{"type":"array","items":{"type":"string"}},"note":{"type":["string","null"]}}}`)},
		{Name: "free"},
	}
	g, err := ToolCallXML(tools)
	if err != nil {
		t.Fatal(err)
	}
	call := func(name string, params ...string) string {
		var b strings.Builder
		b.WriteString("\n<function=" + name + ">\n")
		for i := 0; i < len(params); i += 2 {
			b.WriteString("<parameter=" + params[i] + ">\n" + params[i+1] + "\n</parameter>\n")
		}
		b.WriteString("</function>\n")
		return b.String()
	}
	ok := []string{
		call("get_weather", "city", "Paris", "unit", "celsius"),
		call("get_weather", "city", "São Paulo\nBrazil </param", "unit", "fahrenheit", "days", "7"),
		call("get_weather", "city", "", "unit", "celsius"),
		call("set", "on", "True", "opts", `{"a": 1}`, "tags", `["x", "y"]`, "note", "anything"),
		call("set"),
		call("free", "anything", "goes", "x y", "1"),
		strings.TrimSuffix(call("set", "on", "false"), "\n"),
	}
	bad := []string{
		call("get_weather", "city", "Paris"),                                 // unit required
		call("get_weather", "unit", "celsius", "city", "Paris"),              // out of order
		call("get_weather", "city", "Paris", "unit", "kelvin"),               // not in the enum
		call("get_weather", "city", "Paris", "unit", "celsius", "days", "8"), // out of bounds
		call("get_weather", "city", "Paris", "unit", "celsius", "days", "x"),
		call("set", "on", "yes"),
		call("set", "opts", `{"b": 1}`),
		call("nope"),
		call("get_weather", "city", "a\x01b", "unit", "celsius"),
		call("set", "on", "true") + "\n\n",
	}
	checkDocs(t, "XML tool calls", g, ok, bad)
	// A string's pattern and length bounds hold for its raw text, the
	// closing tag's bytes included where they turn out to be text.
	g, err = ToolCallXML([]Tool{{Name: "a", Parameters: []byte(`{"type":"object","properties":{"s":{"type":"string","pattern":"^x[^#]*$","minLength":2,"maxLength":6},"u":{"type":"string","pattern":"^(é|\\n)+$"}},"required":["s"]}`), Strict: true}})
	if err != nil {
		t.Fatal(err)
	}
	checkDocs(t, "XML constrained strings", g, []string{
		call("a", "s", "xy"), call("a", "s", "x\ny"), call("a", "s", "xyzzy!"), call("a", "s", "x\n</pa"),
		call("a", "s", "xé", "u", "é\né"), call("a", "s", "xx", "u", "\n"),
	}, []string{
		call("a", "s", "x"), call("a", "s", "yx"), call("a", "s", "xyzzy!!"), call("a", "s", "x#y"), call("a", "s", "x\n</parameter>"),
		call("a", "s", "xx", "u", "e"), call("a", "s", "xx", "u", ""), call("a"),
		call("a", "s", "x\n</par"), call("a", "s", "xx", "u", "é\n</x"), // the tag's bytes as text count
	})
	// No dead end: where the value cannot end yet, the tag's first bytes
	// are taken only while they may still be text.
	prefix := "\n<function=a>\n<parameter=s>\nxx\n</parameter>\n<parameter=u>\n\n<"
	if at, _ := feed(t, g, prefix); at != len(prefix)-1 {
		t.Fatalf("%q: failed at %d, want at the last byte (u cannot be empty, nor hold '<')", prefix, at)
	}
	if _, err := ToolCallXML(make([]Tool, 65)); err == nil {
		t.Fatal("65 tools compiled in the XML format")
	}
}

// TestXMLMaskMatchesFeed runs the mask/feed equivalence on an XML call
// grammar with pieces like a tokenizer's.
func TestXMLMaskMatchesFeed(t *testing.T) {
	g, err := ToolCallXML([]Tool{
		{Name: "f", Parameters: []byte(`{"type":"object","properties":{"a":{"type":"string"},"n":{"type":"integer","maximum":20},"b":{"enum":["x","xy"]},"c":{"type":"string","pattern":"^[xé\\n]*y$","maxLength":5}},"required":["n"]}`)},
		{Name: "g"},
	})
	if err != nil {
		t.Fatal(err)
	}
	pieces := []string{"\n", "<", "function", "=f", "=g", ">\n", "<parameter", "=a", "=n", "=b", "=c", "</", "parameter", "function", ">", "1", "2", "0", "x", "y",
		"xy", "\n</parameter>\n", "é", "\xc3", "\xa9", "a b", ">\n<", "=", "\n\n", " "}
	toks := make([][]byte, len(pieces))
	for i, p := range pieces {
		toks[i] = []byte(p)
	}
	if n := checkMaskMatchesFeed(t, g, toks, NewVocab(toks, len(toks)), 200, 60); n == 0 {
		t.Fatal("no walk completed a call")
	} else {
		t.Logf("%d of 200 walks completed a call", n)
	}
}
