package e2e

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// sseEvent is one named server-sent event (Anthropic's and the Responses
// API's streams name every event).
type sseEvent struct {
	name string
	data gjson.Result
}

// namedEvents posts a streaming request and returns its events, checking
// the SSE framing: "event: NAME" then "data: JSON" whose type is NAME,
// then a blank line.
func namedEvents(tb testing.TB, url string, body any, headers ...string) []sseEvent {
	tb.Helper()
	req, _ := http.NewRequest("POST", url, bytes.NewReader(jsonBody(tb, body)))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		tb.Fatalf("stream: status %d: %s", resp.StatusCode, data)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		tb.Fatalf("stream: Content-Type %q", ct)
	}
	var out []sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	name := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if name != "" {
				tb.Fatalf("stream: event %q without data", name)
			}
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			data := line[len("data: "):]
			if name == "" || !gjson.Valid(data) {
				tb.Fatalf("stream: data line %q (event %q)", data, name)
			}
			r := gjson.Parse(data)
			if r.Get("type").Str != name {
				tb.Fatalf("stream: event %q carries type %q", name, r.Get("type").Str)
			}
			out = append(out, sseEvent{name, r})
			name = ""
		default:
			tb.Fatalf("stream: unexpected line %q", line)
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

func eventNames(evs []sseEvent) string {
	names := make([]string, len(evs))
	for i, e := range evs {
		names[i] = e.name
	}
	return strings.Join(names, " ")
}
