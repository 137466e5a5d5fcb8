package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/server/testmodel"
)

// memUsage is an in-memory UsageStore: the handler's contract, not Badger's
// (store/ and cmd test the real one).
type memUsage struct{ rows map[[2]string]UsageCounts }

func (m *memUsage) AddUsage(apiKey, model string, u UsageCounts) error {
	k := [2]string{apiKey, model}
	r := m.rows[k]
	r.Requests += u.Requests
	r.Errors += u.Errors
	r.PromptTokens += u.PromptTokens
	r.CompletionTokens += u.CompletionTokens
	r.CachedTokens += u.CachedTokens
	m.rows[k] = r
	return nil
}

type usageRow struct {
	Key   string      `json:"key"`
	Model string      `json:"model"`
	U     UsageCounts `json:"usage"`
}

func (m *memUsage) QueryUsage(q UsageQuery) (any, error) {
	out := []usageRow{}
	for _, key := range []string{"k1", "k2"} {
		if q.APIKey != "" && key != q.APIKey {
			continue
		}
		for k, u := range m.rows {
			if k[0] == key && (q.Model == "" || q.Model == k[1]) {
				out = append(out, usageRow{key, k[1], u})
			}
		}
	}
	return out, nil
}

func TestUsageEndpoint(t *testing.T) {
	dir := t.TempDir()
	if err := testmodel.Build(dir, testmodel.Options{}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Load(dir, engine.Options{Device: "cpu", ContextLength: 256, MaxBatchTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := New(e, Config{ModelName: "tiny", Usage: &memUsage{rows: map[[2]string]UsageCounts{}}})
	if err != nil {
		t.Fatal(err)
	}
	s.recordUsage("k1", &LogEntry{Status: 200, PromptTokens: 100, CompletionTokens: 5, CachedTokens: 64})
	s.recordUsage("k1", &LogEntry{Status: 500, PromptTokens: 3})
	s.recordUsage("k2", &LogEntry{Status: 200, PromptTokens: 7})
	s.App().Get("/test/usage", s.handleUsage)
	cases := []struct {
		name, query, key string
		status           int
		want             []usageRow
	}{
		{"own rows only", "", "k1", 200, []usageRow{{"k1", "tiny", UsageCounts{Requests: 2, Errors: 1, PromptTokens: 103, CompletionTokens: 5, CachedTokens: 64}}}},
		{"no key sees all", "?from=2026-01-01", "", 200, nil},
		{"bad day", "?from=yesterday", "", 400, nil},
		{"other model", "?model=nope", "", 200, []usageRow{}},
	}
	for _, tc := range cases {
		req := httptest.NewRequest("GET", "/test/usage"+tc.query, nil)
		if tc.key != "" {
			req.Header.Set("Authorization", "Bearer "+tc.key)
		}
		resp, err := s.App().Test(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.status {
			t.Fatalf("%s: status %d: %s", tc.name, resp.StatusCode, body)
		}
		if tc.status != 200 {
			continue
		}
		var out struct {
			Data []usageRow `json:"data"`
		}
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("%s: %v in %s", tc.name, err, body)
		}
		if tc.want == nil {
			if len(out.Data) != 2 {
				t.Fatalf("%s: %d rows, want 2: %s", tc.name, len(out.Data), body)
			}
			continue
		}
		if len(out.Data) != len(tc.want) {
			t.Fatalf("%s: %s", tc.name, body)
		}
		for i := range tc.want {
			if out.Data[i] != tc.want[i] {
				t.Fatalf("%s: %+v, want %+v", tc.name, out.Data[i], tc.want[i])
			}
		}
	}
}

// TestCachedTokensReported: a repeated long prompt reports the reused
// blocks in usage.prompt_tokens_details.cached_tokens.
func TestCachedTokensReported(t *testing.T) {
	dir := t.TempDir()
	if err := testmodel.Build(dir, testmodel.Options{}); err != nil {
		t.Fatal(err)
	}
	e, err := engine.Load(dir, engine.Options{Device: "cpu", ContextLength: 512, MaxBatchTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	s, err := New(e, Config{ModelName: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 150)
	for i := range ids {
		ids[i] = fmt.Sprint(100 + i%50)
	}
	body := `{"model":"tiny","prompt":[` + strings.Join(ids, ",") + `],"max_tokens":2,"temperature":0}`
	var cached []int
	for i := 0; i < 2; i++ {
		resp, err := s.App().Test(httptest.NewRequest("POST", "/v1/completions", strings.NewReader(body)), -1)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		var out struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
				Details      struct {
					Cached int `json:"cached_tokens"`
				} `json:"prompt_tokens_details"`
			} `json:"usage"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil || out.Usage.PromptTokens != 150 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		cached = append(cached, out.Usage.Details.Cached)
	}
	if cached[0] != 0 || cached[1] != 128 {
		t.Fatalf("cached tokens %v, want [0 128]", cached)
	}
}
