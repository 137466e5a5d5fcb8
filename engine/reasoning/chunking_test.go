package reasoning

import (
	"strings"
	"testing"
)

// TestChunkingInvariance: realistic replies, with and without the opener in
// the prompt, give Split's result whole, byte by byte, in random cuts, in
// every cut into two pieces and in every cut into three pieces whose middle
// one is at most 12 bytes (so each marker is also split at both ends).
func TestChunkingInvariance(t *testing.T) {
	long := strings.Repeat("Step: compare </th and </thinking> and 日本語…\n", 40)
	replies := []string{
		"<think>\nThe user wants the weather.\n</think>\n\nIt is sunny in Paris.",
		"The user wants the weather.\n</think>\n\nIt is sunny.",
		"\n</think>\n\nHello",
		"<think>\n\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
		"  \n<think>考えています…\n\n</think>\n\n\n答えは4です。\n",
		"Thinking about </thi and </think_x\n\n</think>\nok </think> after",
		"<think>\nstill thinking when the budget ran out" + ForcedClose + "Answer.",
		"<think>\ntruncated\n\n</thi",
		"Plain answer without markers.\n",
		"Sure. <think>not reasoning</think> done",
		"<think>a</think>b<think>c</think>d",
		"<think>\n" + long + "\n</think>\n\n" + long,
	}
	for _, in := range replies {
		for _, open := range []bool{false, true} {
			r, c := Split(in, open)
			step := 1
			if len(in) > 300 {
				step = 29 // long inputs: a sample of the cut points, to stay fast
			}
			for i := 0; i <= len(in); i += step {
				for j := i; j <= min(len(in), i+12); j++ {
					r2, c2 := streamSplit(open, OpenMarker, CloseMarker, []string{in[:i], in[i:j], in[j:]})
					if r2 != r || c2 != c {
						t.Fatalf("%q (open %v) cut at %d,%d: %q, %q; Split %q, %q", in, open, i, j, r2, c2, r, c)
					}
				}
			}
			for how, chunks := range chunkings(in, int64(len(in))) {
				r2, c2 := streamSplit(open, OpenMarker, CloseMarker, chunks)
				if r2 != r || c2 != c {
					t.Fatalf("%q (open %v) %s: %q, %q; Split %q, %q", in, open, how, r2, c2, r, c)
				}
			}
		}
	}
}
