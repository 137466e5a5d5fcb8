package cuda

import "testing"

// TestSplitAt checks where a captured forward is cut in two: after its
// eighth launch, copies before that launch in the first part and those
// after it in the second; never for fewer than 12 launches.
func TestSplitAt(t *testing.T) {
	// trace builds records from a pattern: 'L' a launch, 'C' a copy.
	trace := func(p string) []rec {
		rs := make([]rec, len(p))
		for i, c := range p {
			rs[i].kind = recLaunch
			if c == 'C' {
				rs[i].kind = recHtoD
			}
		}
		return rs
	}
	for _, c := range []struct {
		pattern string
		want    int
	}{
		{"", 0},
		{"LLLLLLLLLLL", 0},   // 11 launches
		{"CLLLLLLLLLLLC", 0}, // 11 launches and copies
		{"LLLLLLLLLLLL", 8},  // 12
		{"CLLLLLLLLCLLLL", 9},
		{"CCLCLLLLLLLCLLLLLLLLLLLLLLLLLLLLLLC", 11},
	} {
		if got := splitAt(trace(c.pattern)); got != c.want {
			t.Errorf("splitAt(%s) = %d, want %d", c.pattern, got, c.want)
		}
	}
}
