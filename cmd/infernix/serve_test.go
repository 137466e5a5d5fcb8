//go:build unix

package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer that serve's goroutines may share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestServeSecondSignal: the first SIGINT/SIGTERM starts a graceful shutdown
// that waits for open connections; a second one stops waiting, and the
// server still closes the engine (flushing --data-dir) and returns.
func TestServeSecondSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			// Keep the signals from killing the test process whatever
			// serve has registered at the moment they arrive.
			guard := make(chan os.Signal, 4)
			signal.Notify(guard, sig)
			defer signal.Stop(guard)

			dataDir := t.TempDir()
			var out syncBuffer
			done := make(chan error, 1)
			go func() {
				done <- cmdServe([]string{"--model", filepath.Join(testdata, "models", "demo"), "--device", "cpu", "--port", "0",
					"--data-dir", dataDir, "--log-file", filepath.Join(t.TempDir(), "log")}, &out)
			}()
			addr := waitFor(t, &out, regexp.MustCompile(`listening on http://(\S+) `), done)
			body := `{"prompt":"` + strings.Repeat("word ", 200) + `","max_tokens":2}`
			resp, err := http.Post("http://"+addr+"/v1/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("completion: status %d", resp.StatusCode)
			}
			// A client that never finishes its request holds the graceful
			// shutdown open until its deadline.
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.Write([]byte("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"))
			syscall.Kill(os.Getpid(), sig)
			waitFor(t, &out, regexp.MustCompile(`shutting down`), done)
			time.Sleep(100 * time.Millisecond)
			t0 := time.Now()
			syscall.Kill(os.Getpid(), sig)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("serve: %v", err)
				}
				if d := time.Since(t0); d > 3*time.Second {
					t.Fatalf("serve returned %v after the second signal", d)
				}
			case <-time.After(5 * time.Second):
				err := <-done
				t.Fatalf("serve still running 5 s after a second %v (returned %v after %v)", sig, err, time.Since(t0))
			}
			// The prefix cache of the request served before the signals was
			// saved at shutdown.
			ls, stderr, code := cli(t, "cache", "ls", "--data-dir", dataDir)
			if code != 0 || !regexp.MustCompile(`(?m)^[0-9a-f]+ +[1-9]`).MatchString(ls) {
				t.Fatalf("cache ls after shutdown: exit %d %q %s", code, ls, stderr)
			}
		})
	}
}

// waitFor waits until out matches re and returns its first group.
func waitFor(t *testing.T, out *syncBuffer, re *regexp.Regexp, done chan error) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			if len(m) > 1 {
				return m[1]
			}
			return m[0]
		}
		select {
		case err := <-done:
			t.Fatalf("serve returned %v before %q: %s", err, re, out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no %q in %s", re, strings.TrimSpace(out.String()))
	return ""
}

// TestServePortInUse: a taken port fails at once, naming --port.
func TestServePortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	port := ln.Addr().(*net.TCPAddr).Port
	for _, args := range [][]string{
		{"serve", "--model", filepath.Join(testdata, "models", "demo"), "--port", strconv.Itoa(port)},
		{"serve", "--model", filepath.Join(testdata, "models", "demo"), "--host", "127.0.0.1", "--port", strconv.Itoa(port), "--data-dir", ""},
	} {
		_, stderr, code := cli(t, args...)
		if code == 0 || !strings.Contains(stderr, "--port "+strconv.Itoa(port)) || !strings.Contains(stderr, "in use") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// TestServeFlagErrors: serve's own numbers out of range fail before the
// model loads, naming the flag.
func TestServeFlagErrors(t *testing.T) {
	for _, c := range []struct{ flag, value string }{
		{"--default-thinking-budget", "-5"},
		{"--max-body-mb", "0"},
		{"--port", "70000"},
	} {
		_, stderr, code := cli(t, "serve", "--model", filepath.Join(t.TempDir(), "nosuch"), "--data-dir", "", c.flag, c.value)
		if code == 0 || !strings.Contains(stderr, c.flag) || strings.Contains(stderr, "nosuch") {
			t.Errorf("serve %s %s: exit %d, stderr %q", c.flag, c.value, code, stderr)
		}
	}
}
