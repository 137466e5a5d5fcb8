package server

import (
	"encoding/json"
	"os"
	"sync"
	"time"
)

// RequestLogVersion is the schema version written in every request-log
// line ("v"). Bump it when a field changes meaning or is removed.
const RequestLogVersion = 1

// LogEntry is one line of the request log (--request-log FILE): one JSON
// object per request, written when the request ends (also for rejected
// requests). Durations are milliseconds; zero when the stage never happened.
type LogEntry struct {
	V        int    `json:"v"`
	Time     string `json:"time"` // RFC 3339 with nanoseconds, when the request ended
	ID       string `json:"id"`   // the response id (chatcmpl-…, cmpl-…) or a request id
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	Remote   string `json:"remote"`
	Status   int    `json:"status"`
	Stream   bool   `json:"stream"`

	PromptTokens     int    `json:"prompt_tokens"`
	CompletionTokens int    `json:"completion_tokens"`
	CachedTokens     int    `json:"cached_tokens"`
	FinishReason     string `json:"finish_reason,omitempty"`
	Preemptions      int    `json:"preemptions"`

	// Tags are the on_response hook's tags (see docs/scripting.md).
	Tags map[string]string `json:"tags,omitempty"`

	Timings LogTimings `json:"timings_ms"`
	Error   *string    `json:"error"`

	// apiKey is the client's key, for usage statistics; never logged.
	apiKey string
}

// LogTimings are a request's stages in milliseconds: queue (waiting for a
// lane), prefill (prompt computation), ttft (arrival to first token), decode
// (first to last token) and total (arrival to end).
type LogTimings struct {
	Queue   float64 `json:"queue"`
	Prefill float64 `json:"prefill"`
	TTFT    float64 `json:"ttft"`
	Decode  float64 `json:"decode"`
	Total   float64 `json:"total"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// requestLog appends lines to a file; safe for concurrent use.
type requestLog struct {
	mu sync.Mutex
	f  *os.File
}

func openRequestLog(path string) (*requestLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	return &requestLog{f: f}, nil
}

// write appends one line; a failing disk does not fail the request.
func (l *requestLog) write(e *LogEntry) {
	if l == nil {
		return
	}
	e.V = RequestLogVersion
	e.Time = time.Now().UTC().Format(time.RFC3339Nano)
	b, err := json.Marshal(e)
	if err != nil {
		return
	}
	b = append(b, '\n')
	l.mu.Lock()
	l.f.Write(b) // one write per line: lines never interleave
	l.mu.Unlock()
}

func (l *requestLog) close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.f.Close()
}
