package reasoning

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"testing"
)

type splitCase struct {
	Name         string `json:"name"`
	OpenInPrompt bool   `json:"open_in_prompt"`
	Input        string `json:"input"`
	Reasoning    string `json:"reasoning"`
	Content      string `json:"content"`
}

func loadCases(t testing.TB, path string) []splitCase {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct{ Cases []splitCase }
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if len(f.Cases) == 0 {
		t.Fatalf("%s: no cases", path)
	}
	return f.Cases
}

// streamSplit feeds chunks to a Splitter and joins what it returns.
func streamSplit(openInPrompt bool, open, close string, chunks []string) (string, string) {
	s := NewSplitter(openInPrompt, open, close)
	var r, c strings.Builder
	for _, ch := range chunks {
		a, b := s.Feed(ch)
		r.WriteString(a)
		c.WriteString(b)
	}
	a, b := s.Finish()
	r.WriteString(a)
	c.WriteString(b)
	return r.String(), c.String()
}

func chunkings(s string, seed int64) map[string][]string {
	out := map[string][]string{"whole": {s}}
	var bytes1 []string
	for i := 0; i < len(s); i++ {
		bytes1 = append(bytes1, s[i:i+1])
	}
	out["bytes"] = bytes1
	r := rand.New(rand.NewSource(seed))
	for k := 0; k < 3; k++ {
		var parts []string
		for rest := s; rest != ""; {
			n := min(1+r.Intn(10), len(rest))
			parts, rest = append(parts, rest[:n]), rest[n:]
		}
		out[fmt.Sprintf("random%d", k)] = parts
	}
	return out
}

// TestCases runs the hand-written cases and those rendered by the real
// templates, whole and streamed in several chunkings.
func TestCases(t *testing.T) {
	for _, file := range []string{"testdata/cases.json", "testdata/rendered.json"} {
		for _, c := range loadCases(t, file) {
			t.Run(c.Name, func(t *testing.T) {
				r, ct := Split(c.Input, c.OpenInPrompt)
				if r != c.Reasoning || ct != c.Content {
					t.Errorf("Split = %q, %q; want %q, %q", r, ct, c.Reasoning, c.Content)
				}
				for how, chunks := range chunkings(c.Input, int64(len(c.Input))) {
					r, ct := streamSplit(c.OpenInPrompt, OpenMarker, CloseMarker, chunks)
					if r != c.Reasoning || ct != c.Content {
						t.Errorf("%s: streamed %q, %q; want %q, %q", how, r, ct, c.Reasoning, c.Content)
					}
				}
			})
		}
	}
}

// TestHoldsBackOnlyWhatItMust checks what a Feed returns at once.
func TestHoldsBackOnlyWhatItMust(t *testing.T) {
	tests := []struct {
		open         bool
		feed         string
		wantR, wantC string
		inReasoning  bool
	}{
		{false, "Hello", "", "Hello", false},
		{false, "Hello <thi", "", "Hello <thi", false},
		{false, "\n\n", "", "", false},
		{false, "<thi", "", "", false},
		{false, "<think>\nabc", "abc", "", true},
		{true, "abc\n", "abc", "", true},
		{true, "abc</th", "abc", "", true},
		{true, "abc\n\n</think", "abc", "", true},
		{true, "abc</think>\n", "abc", "", false},
		{true, "abc</think>\n\nxyz\n", "abc", "xyz\n", false},
	}
	for _, tt := range tests {
		s := NewSplitter(tt.open, OpenMarker, CloseMarker)
		r, c := s.Feed(tt.feed)
		if r != tt.wantR || c != tt.wantC || s.InReasoning() != tt.inReasoning {
			t.Errorf("Feed(%q) = %q, %q, in reasoning %v; want %q, %q, %v", tt.feed, r, c, s.InReasoning(), tt.wantR, tt.wantC, tt.inReasoning)
		}
	}
}

func TestOtherMarkers(t *testing.T) {
	in := "◁think▷plan\n◁/think▷\nanswer"
	r, c := streamSplit(false, "◁think▷", "◁/think▷", chunkings(in, 1)["bytes"])
	if r != "plan" || c != "answer" {
		t.Errorf("got %q, %q", r, c)
	}
	if r2, c2 := split(in, false, "◁think▷", "◁/think▷"); r2 != r || c2 != c {
		t.Errorf("split %q, %q", r2, c2)
	}
}

func TestOpenInPrompt(t *testing.T) {
	for prompt, want := range map[string]bool{
		"<|im_start|>assistant\n<think>\n":                             true,
		"<|im_start|>assistant\n<think>\n\n</think>\n\n":               false,
		"<|im_start|>assistant\n":                                      false,
		"<|im_start|>user\n<think><|im_end|>\n<|im_start|>assistant\n": false,
	} {
		if got := OpenInPrompt(prompt, OpenMarker); got != want {
			t.Errorf("OpenInPrompt(%q) = %v", prompt, got)
		}
	}
}

func TestForcedCloseEndsReasoning(t *testing.T) {
	r, c := Split("thinking so far"+ForcedClose+"answer", true)
	if r != "thinking so far" || c != "answer" {
		t.Errorf("got %q, %q", r, c)
	}
}

func TestBadMarkersPanic(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic")
		}
	}()
	NewSplitter(false, "", CloseMarker)
}

// FuzzSplit: any chunking of any text gives Split's result, and text that
// does not start with a marker comes back as content unchanged.
func FuzzSplit(f *testing.F) {
	for _, file := range []string{"testdata/cases.json", "testdata/rendered.json"} {
		for _, c := range loadCases(f, file) {
			f.Add(c.Input, c.OpenInPrompt, int64(len(c.Input)))
		}
	}
	f.Fuzz(func(t *testing.T, in string, openInPrompt bool, seed int64) {
		r, c := Split(in, openInPrompt)
		cuts := chunkings(in, seed)
		for _, how := range []string{"bytes", "random0", "random1"} {
			r2, c2 := streamSplit(openInPrompt, OpenMarker, CloseMarker, cuts[how])
			if r2 != r || c2 != c {
				t.Fatalf("%s: streamed %q, %q; Split %q, %q", how, r2, c2, r, c)
			}
		}
		if len(r)+len(c) > len(in) {
			t.Fatalf("output longer than input")
		}
		t2 := strings.TrimLeft(in, " \t\r\n")
		if !openInPrompt && !strings.HasPrefix(t2, OpenMarker) && !strings.HasPrefix(t2, CloseMarker) && (r != "" || c != in) {
			t.Fatalf("no marker at the start, yet %q, %q", r, c)
		}
	})
}
