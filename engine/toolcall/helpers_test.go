package toolcall

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
)

// corpusFile is the layout of testdata/corpus.json and testdata/rendered.json.
type corpusFile struct {
	Tools map[string][]struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"tools"`
	Cases []corpusCase `json:"cases"`
}

type corpusCase struct {
	Name    string     `json:"name"`
	Format  string     `json:"format"`
	Tools   *string    `json:"tools"`
	Note    string     `json:"note"`
	Input   textLines  `json:"input"`
	Content textLines  `json:"content"`
	Calls   []wantCall `json:"calls"`
}

// textLines is a string written in the file either whole or as a list of
// lines, for readability.
type textLines string

func (t *textLines) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*t = textLines(s)
		return nil
	}
	var parts []string
	if err := json.Unmarshal(b, &parts); err != nil {
		return err
	}
	*t = textLines(strings.Join(parts, ""))
	return nil
}

// wantCall's arguments are a JSON object (compared after compaction, so key
// order counts) or a string holding the exact expected text.
type wantCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

func (w wantCall) args(t testing.TB) string {
	var s string
	if json.Unmarshal(w.Arguments, &s) == nil {
		return s
	}
	var b bytes.Buffer
	if err := json.Compact(&b, w.Arguments); err != nil {
		t.Fatalf("bad expected arguments %s: %v", w.Arguments, err)
	}
	return b.String()
}

func loadCorpus(t testing.TB, path string) (corpusFile, map[string][]Tool) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f corpusFile
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	sets := map[string][]Tool{}
	for name, ts := range f.Tools {
		for _, x := range ts {
			sets[name] = append(sets[name], Tool{Name: x.Name, Parameters: x.Parameters})
		}
	}
	return f, sets
}

func (c corpusCase) format(t testing.TB) Format {
	switch c.Format {
	case "xml":
		return FormatXML
	case "json":
		return FormatJSON
	}
	t.Fatalf("%s: unknown format %q", c.Name, c.Format)
	return 0
}

// streamed is what a Parser produced, with the event stream checked for the
// order the API promises.
type streamed struct {
	content string
	calls   []Call
}

func stream(f Format, tools []Tool, chunks []string) (streamed, error) {
	p := NewParser(f, tools)
	var out streamed
	var b strings.Builder
	open := -1
	check := func(evs []Event) error {
		for _, e := range evs {
			switch e.Kind {
			case Content:
				if open >= 0 {
					return fmt.Errorf("content %q inside call %d", e.Text, open)
				}
				if e.Text == "" {
					return fmt.Errorf("empty content event")
				}
				b.WriteString(e.Text)
			case CallStart:
				if open >= 0 || e.Index != len(out.calls) || e.Name == "" {
					return fmt.Errorf("bad call start %+v (open %d, have %d)", e, open, len(out.calls))
				}
				open = e.Index
				out.calls = append(out.calls, Call{Name: e.Name})
			case CallArgs:
				if e.Index != open || e.ArgsDelta == "" {
					return fmt.Errorf("bad call args %+v (open %d)", e, open)
				}
				out.calls[open].Arguments += e.ArgsDelta
			case CallEnd:
				if e.Index != open {
					return fmt.Errorf("bad call end %+v (open %d)", e, open)
				}
				open = -1
			default:
				return fmt.Errorf("unknown event %+v", e)
			}
		}
		return nil
	}
	for _, c := range chunks {
		if err := check(p.Feed(c)); err != nil {
			return out, err
		}
	}
	if err := check(p.Finish()); err != nil {
		return out, err
	}
	if open >= 0 {
		return out, fmt.Errorf("call %d left open after Finish", open)
	}
	if p.held != "" || p.st != stContent {
		return out, fmt.Errorf("parser not drained after Finish: state %d held %q", p.st, p.held)
	}
	out.content = b.String()
	return out, nil
}

// chunkings returns ways to cut s: whole, byte by byte, and a few random cuts.
func chunkings(s string, seed int64) map[string][]string {
	out := map[string][]string{"whole": {s}}
	bytes1 := make([]string, len(s))
	for i := 0; i < len(s); i++ {
		bytes1[i] = s[i : i+1]
	}
	out["bytes"] = bytes1
	r := rand.New(rand.NewSource(seed))
	for k := 0; k < 3; k++ {
		var parts []string
		for rest := s; rest != ""; {
			n := 1 + r.Intn(12)
			if n > len(rest) {
				n = len(rest)
			}
			parts = append(parts, rest[:n])
			rest = rest[n:]
		}
		out[fmt.Sprintf("random%d", k)] = parts
	}
	return out
}

func sameCalls(a, b []Call) bool {
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

// checkArgs verifies every call's arguments are one JSON object.
func checkArgs(calls []Call) error {
	for i, c := range calls {
		a := strings.TrimSpace(c.Arguments)
		if !json.Valid([]byte(a)) || a == "" || a[0] != '{' {
			return fmt.Errorf("call %d (%s) arguments not a JSON object: %q", i, c.Name, c.Arguments)
		}
	}
	return nil
}
