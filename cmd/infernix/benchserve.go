package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/infernix/infernix/server"
)

func init() {
	register("bench-serve", "load test: N concurrent streaming clients against a server (p50/p99 TTFT, inter-token latency, throughput)", cmdBenchServe)
}

// benchServeResult is what bench-serve measures (--json prints it).
type benchServeResult struct {
	URL             string  `json:"url"`
	Endpoint        string  `json:"endpoint"`
	Clients         int     `json:"clients"`
	Requests        int     `json:"requests"`
	Failed          int     `json:"failed"`
	PromptTokens    int     `json:"prompt_tokens"`
	OutputTokens    int     `json:"output_tokens"`
	WallSeconds     float64 `json:"wall_s"`
	RequestsPerSec  float64 `json:"requests_per_s"`
	OutputTokPerSec float64 `json:"output_tok_per_s"`
	TTFTms          pcts    `json:"ttft_ms"`
	ITLms           pcts    `json:"itl_ms"`
	E2Ems           pcts    `json:"e2e_ms"`
	FirstError      string  `json:"first_error,omitempty"`
}

type pcts struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

func cmdBenchServe(args []string, stdout io.Writer) error {
	fs := newFlags("bench-serve")
	var ef engineFlags
	ef.register(fs)
	url := fs.String("url", "", "server to load, e.g. http://127.0.0.1:8080 (default: start one in process on --model)")
	apiKey := fs.String("api-key", "", "API key to send")
	clients := fs.Int("clients", 4, "concurrent clients")
	requests := fs.Int("requests", 32, "requests in total")
	promptTokens := fs.Int("prompt-tokens", 128, "approximate prompt length in tokens")
	maxTokens := fs.Int("max-tokens", 64, "output tokens per request (ignore_eos: exactly this many)")
	endpoint := fs.String("endpoint", "chat", "chat (/v1/chat/completions) or completions (/v1/completions)")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *clients < 1 || *requests < 1 || *maxTokens < 1 || *promptTokens < 1 {
		return fmt.Errorf("--clients, --requests, --max-tokens and --prompt-tokens must be positive")
	}
	if *endpoint != "chat" && *endpoint != "completions" {
		return fmt.Errorf("--endpoint %q: expected chat or completions", *endpoint)
	}
	base := strings.TrimRight(*url, "/")
	if base != "" {
		if err := checkBenchURL(base); err != nil {
			return err
		}
	}
	if base == "" {
		if ef.maxLanes < *clients && !flagSet(fs, "max-lanes") {
			ef.maxLanes = *clients
		}
		e, err := ef.load()
		if err != nil {
			return err
		}
		defer e.Close()
		srv, err := server.New(e, server.Config{})
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		go srv.Serve(ln)
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			srv.Shutdown(ctx)
		}()
		base = "http://" + ln.Addr().String()
	}
	res := runLoad(base, *apiKey, *endpoint, *clients, *requests, *promptTokens, *maxTokens)
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(res); err != nil {
			return err
		}
		if res.Failed == res.Requests {
			return fmt.Errorf("every request failed: %s", res.FirstError)
		}
		return nil
	}
	fmt.Fprintf(stdout, "bench-serve: %s /v1/%s, %d clients, %d requests, prompt ≈%d tokens, %d output tokens each (streaming)\n",
		res.URL, map[string]string{"chat": "chat/completions", "completions": "completions"}[*endpoint], res.Clients, res.Requests, *promptTokens, *maxTokens)
	fmt.Fprintf(stdout, "requests:   %d ok, %d failed in %.2f s (%.2f req/s)\n", res.Requests-res.Failed, res.Failed, res.WallSeconds, res.RequestsPerSec)
	fmt.Fprintf(stdout, "tokens:     %d prompt, %d output (%.1f output tok/s)\n", res.PromptTokens, res.OutputTokens, res.OutputTokPerSec)
	for _, row := range []struct {
		name string
		p    pcts
	}{{"TTFT", res.TTFTms}, {"ITL", res.ITLms}, {"E2E", res.E2Ems}} {
		fmt.Fprintf(stdout, "%-5s ms:   p50 %8.1f   p90 %8.1f   p99 %8.1f   max %8.1f\n", row.name, row.p.P50, row.p.P90, row.p.P99, row.p.Max)
	}
	if res.FirstError != "" {
		fmt.Fprintf(stdout, "first error: %s\n", res.FirstError)
	}
	if res.Failed == res.Requests {
		return fmt.Errorf("every request failed: %s", res.FirstError)
	}
	return nil
}

// checkBenchURL rejects a --url that is not http(s)://HOST[:PORT] or that
// nothing answers on, before any request is timed.
func checkBenchURL(base string) error {
	u, err := neturl.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %s: expected http://HOST:PORT or https://HOST:PORT", base)
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(u.Hostname(), port), 10*time.Second)
	if err != nil {
		return fmt.Errorf("--url %s: %v", base, err)
	}
	conn.Close()
	return nil
}

// flagSet reports whether the command line set the flag.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// benchPrompt makes a prompt of about n tokens (common English words are
// one token each in Qwen's vocabulary); i varies its start so that requests
// differ.
func benchPrompt(i, n int) string {
	words := strings.Fields("the quick brown fox jumps over the lazy dog and then runs back home to sleep")
	var b strings.Builder
	fmt.Fprintf(&b, "Request %d:", i)
	for k := 0; k < n; k++ {
		b.WriteByte(' ')
		b.WriteString(words[(i+k)%len(words)])
	}
	return b.String()
}

type loadSample struct {
	ttft, e2e       time.Duration
	itl             []time.Duration
	prompt, outToks int
	err             error
}

func runLoad(base, key, endpoint string, clients, requests, promptTokens, maxTokens int) benchServeResult {
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 30 * time.Minute}
	jobs := make(chan int)
	samples := make([]loadSample, requests)
	var wg sync.WaitGroup
	start := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				samples[i] = oneRequest(httpc, base, key, endpoint, benchPrompt(i, promptTokens), maxTokens)
			}
		}()
	}
	for i := 0; i < requests; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	wall := time.Since(start)
	res := benchServeResult{URL: base, Endpoint: endpoint, Clients: clients, Requests: requests, WallSeconds: wall.Seconds()}
	var ttft, itl, e2e []float64
	for _, s := range samples {
		if s.err != nil {
			res.Failed++
			if res.FirstError == "" {
				res.FirstError = s.err.Error()
			}
			continue
		}
		res.PromptTokens += s.prompt
		res.OutputTokens += s.outToks
		ttft = append(ttft, ms64(s.ttft))
		e2e = append(e2e, ms64(s.e2e))
		for _, d := range s.itl {
			itl = append(itl, ms64(d))
		}
	}
	res.RequestsPerSec = float64(requests-res.Failed) / wall.Seconds()
	res.OutputTokPerSec = float64(res.OutputTokens) / wall.Seconds()
	res.TTFTms, res.ITLms, res.E2Ems = percentiles(ttft), percentiles(itl), percentiles(e2e)
	return res
}

func ms64(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func percentiles(v []float64) pcts {
	if len(v) == 0 {
		return pcts{}
	}
	sort.Float64s(v)
	at := func(p float64) float64 { return v[min(len(v)-1, int(p*float64(len(v))))] }
	return pcts{P50: at(0.5), P90: at(0.9), P99: at(0.99), Max: v[len(v)-1]}
}

// oneRequest sends one streaming request and times its chunks.
func oneRequest(c *http.Client, base, key, endpoint, prompt string, maxTokens int) loadSample {
	body := map[string]any{"max_tokens": maxTokens, "ignore_eos": true, "stream": true,
		"stream_options": map[string]any{"include_usage": true}}
	path := "/v1/chat/completions"
	if endpoint == "completions" {
		path = "/v1/completions"
		body["prompt"] = prompt
	} else {
		body["messages"] = []map[string]string{{"role": "user", "content": prompt}}
	}
	data, _ := json.Marshal(body)
	req, err := http.NewRequest("POST", base+path, bytes.NewReader(data))
	if err != nil {
		return loadSample{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	t0 := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return loadSample{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return loadSample{err: fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(msg))}
	}
	var s loadSample
	var last time.Time
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Text  string `json:"text"`
				Delta struct {
					Content   string `json:"content"`
					Reasoning string `json:"reasoning_content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &ch); err != nil {
			return loadSample{err: fmt.Errorf("bad chunk %q: %v", line, err)}
		}
		if ch.Error != nil {
			return loadSample{err: errors.New(ch.Error.Message)}
		}
		if ch.Usage != nil {
			s.prompt, s.outToks = ch.Usage.Prompt, ch.Usage.Completion
		}
		text := false
		for _, c := range ch.Choices {
			text = text || c.Text != "" || c.Delta.Content != "" || c.Delta.Reasoning != ""
		}
		if !text {
			continue
		}
		now := time.Now()
		if last.IsZero() {
			s.ttft = now.Sub(t0)
		} else {
			s.itl = append(s.itl, now.Sub(last))
		}
		last = now
	}
	if err := sc.Err(); err != nil {
		return loadSample{err: err}
	}
	s.e2e = time.Since(t0)
	if last.IsZero() {
		return loadSample{err: errors.New("no text arrived")}
	}
	return s
}
