package toolcall

import (
	"os"
	"strings"
	"testing"
)

func TestFormatFromTemplate(t *testing.T) {
	for file, want := range map[string]Format{
		"Qwen-Qwen3-0.6B.jinja": FormatJSON,
		"Qwen3-Coder.jinja":     FormatXML,
		"Qwen3.5-4B.jinja":      FormatXML,
	} {
		data, err := os.ReadFile("../../tests/testdata/chat-templates/" + file)
		if err != nil {
			t.Fatal(err)
		}
		if got := FormatFromTemplate(string(data)); got != want {
			t.Errorf("%s: %v, want %v", file, got, want)
		}
	}
}

// step is one Feed and the events it must return, written compactly:
// "c:text", "s:0:name", "a:0:delta", "e:0".
type step struct {
	feed string
	want []string
}

func render(evs []Event) []string {
	var out []string
	for _, e := range evs {
		switch e.Kind {
		case Content:
			out = append(out, "c:"+e.Text)
		case CallStart:
			out = append(out, "s:"+itoa(e.Index)+":"+e.Name)
		case CallArgs:
			out = append(out, "a:"+itoa(e.Index)+":"+e.ArgsDelta)
		case CallEnd:
			out = append(out, "e:"+itoa(e.Index))
		}
	}
	return out
}

func itoa(i int) string { return string(rune('0' + i)) }

var streamTools = append([]Tool{{Name: "write_file", Parameters: []byte(`{"properties":{"content":{"type":"string"}}}`)}}, fuzzTools...)

// TestStreamingShape pins what each Feed releases: content streams at once,
// XML string values stream as they arrive, and only possible markers wait.
func TestStreamingShape(t *testing.T) {
	tests := []struct {
		name   string
		format Format
		steps  []step
	}{
		{"xml string value streams", FormatXML, []step{
			{"Writing it.\n\n", []string{"c:Writing it."}},
			{"<tool_call>\n<function=write_file>\n", []string{"s:0:write_file"}},
			{"<parameter=content>\nline one\n", []string{`a:0:{"content":"line one`}},
			{"line two</para", []string{`a:0:\nline two`}},
			{"meter>\n", nil},
			{"</function>\n</tool_call>", []string{`a:0:"}`, "e:0"}},
			{"\n\nDone", []string{"c:\n\nDone"}},
		}},
		{"typed value arrives whole", FormatXML, []step{
			{"<function=get_weather>\n<parameter=days>\n1", []string{"s:0:get_weather", `a:0:{"days":`}},
			{"2\n</parameter>\n", nil},
			{"</function>", []string{`a:0:12`}}, // it confirms </parameter>
			{"\n</tool_call>", []string{`a:0:}`, "e:0"}},
		}},
		{"json call arrives whole", FormatJSON, []step{
			{"OK\n<tool_call>\n{\"name\": \"get_weather\",", []string{"c:OK"}},
			{" \"arguments\": {\"city\": \"Paris\"}}\n</tool", nil},
			{"_call>", []string{"s:0:get_weather", `a:0:{"city":"Paris"}`, "e:0"}},
		}},
		{"prose with angle brackets is released", FormatXML, []step{
			{"a < b", []string{"c:a < b"}},
			{" and <", []string{"c: and"}}, // the space waits: a call may follow
			{"b> ok", []string{"c: <b> ok"}},
		}},
		{"json that is not a call is released early", FormatJSON, []step{
			{"{\"answer\"", []string{"c:{\"answer\""}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewParser(tt.format, streamTools)
			for i, s := range tt.steps {
				got := render(p.Feed(s.feed))
				if strings.Join(got, "|") != strings.Join(s.want, "|") {
					t.Fatalf("step %d Feed(%q):\n got %q\nwant %q", i, s.feed, got, s.want)
				}
			}
			p.Finish()
		})
	}
}

// TestContentFeedAllocs: plain prose tokens cost no allocation.
func TestContentFeedAllocs(t *testing.T) {
	p := NewParser(FormatXML, fuzzTools)
	tokens := []string{"The", " weather", " in", " Paris", " is", " sunny", ",", " 21", "°C", "."}
	p.Feed("warm up")
	allocs := testing.AllocsPerRun(100, func() {
		for _, tok := range tokens {
			p.Feed(tok)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run of plain tokens", allocs)
	}
}

func TestFeedAfterFinishPanics(t *testing.T) {
	p := NewParser(FormatJSON, nil)
	p.Finish()
	if evs := p.Finish(); len(evs) != 0 {
		t.Errorf("second Finish gave %v", evs)
	}
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	p.Feed("x")
}
