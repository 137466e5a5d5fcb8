package toolcall

import (
	"testing"
)

// TestCorpus runs every hand-written case (testdata/corpus.json) and every
// case rendered by the real chat templates (testdata/rendered.json), parsed
// whole and streamed in several chunkings including byte by byte.
func TestCorpus(t *testing.T) {
	for _, file := range []string{"testdata/corpus.json", "testdata/rendered.json"} {
		f, sets := loadCorpus(t, file)
		if len(f.Cases) == 0 {
			t.Fatalf("%s: no cases", file)
		}
		for _, c := range f.Cases {
			t.Run(c.Name, func(t *testing.T) {
				var tools []Tool
				if c.Tools != nil {
					var ok bool
					if tools, ok = sets[*c.Tools]; !ok {
						t.Fatalf("unknown tool set %q", *c.Tools)
					}
				}
				format := c.format(t)
				in := string(c.Input)
				content, calls := Parse(format, in, tools)
				if content != string(c.Content) {
					t.Errorf("content\n got %q\nwant %q", content, c.Content)
				}
				if len(calls) != len(c.Calls) {
					t.Fatalf("got %d calls %+v, want %d", len(calls), calls, len(c.Calls))
				}
				for i, w := range c.Calls {
					if calls[i].Name != w.Name || calls[i].Arguments != w.args(t) {
						t.Errorf("call %d\n got %s %s\nwant %s %s", i, calls[i].Name, calls[i].Arguments, w.Name, w.args(t))
					}
				}
				if err := checkArgs(calls); err != nil {
					t.Error(err)
				}
				for how, chunks := range chunkings(in, int64(len(in))) {
					got, err := stream(format, tools, chunks)
					if err != nil {
						t.Fatalf("%s: %v", how, err)
					}
					if got.content != content || !sameCalls(got.calls, calls) {
						t.Errorf("%s: streamed\n %q %+v\nparsed\n %q %+v", how, got.content, got.calls, content, calls)
					}
				}
			})
		}
	}
}
