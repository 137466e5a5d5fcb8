package server

import (
	"strings"
	"testing"
)

func TestHistogram(t *testing.T) {
	h := newHistogram("x_seconds", "help", []float64{0.1, 1})
	for _, v := range []float64{0.05, 0.1, 0.5, 2, 3} {
		h.observe(v)
	}
	cum, sum, count := h.snapshot()
	// le is inclusive: 0.1 falls in the 0.1 bucket.
	if len(cum) != 3 || cum[0] != 2 || cum[1] != 3 || cum[2] != 5 || count != 5 || sum < 5.649 || sum > 5.651 {
		t.Errorf("cum %v sum %v count %v", cum, sum, count)
	}
}

func TestHistogramObserveAllocs(t *testing.T) {
	h := newHistogram("x", "h", []float64{0.1, 1})
	if n := testing.AllocsPerRun(100, func() { h.observe(0.3) }); n != 0 {
		t.Errorf("observe allocates %v times", n)
	}
}

func TestRequestCountsAndLabels(t *testing.T) {
	m := newMetrics()
	m.countRequest("/v1/completions", 200)
	m.countRequest("/v1/completions", 200)
	m.countRequest("a\"b", 404)
	m.ttft.observe(0.2)
	m.generatedTokens.Add(7)
	// The whole exposition needs an engine (gauges): tests/e2e checks it.
	var b []byte
	for _, r := range m.requestCounts() {
		b = appendLabel(b, r.endpoint)
		b = append(b, '\n')
	}
	if !strings.Contains(string(b), `a\"b`) {
		t.Errorf("label not escaped: %s", b)
	}
	got := m.requestCounts()
	if len(got) != 2 || got[0].endpoint != "/v1/completions" || got[0].n != 2 {
		t.Errorf("request counts %+v", got)
	}
	cs := m.counters()
	if cs[1].name != "infernix_generated_tokens_total" || cs[1].value != 7 {
		t.Errorf("counters %+v", cs)
	}
}
