package server

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// keySet holds the accepted API keys as SHA-256 digests, compared in
// constant time so that response timing does not reveal key prefixes.
type keySet struct{ digests [][32]byte }

func newKeySet(keys []string) *keySet {
	ks := &keySet{}
	for _, k := range keys {
		if k = strings.TrimSpace(k); k != "" {
			ks.digests = append(ks.digests, sha256.Sum256([]byte(k)))
		}
	}
	return ks
}

func (ks *keySet) empty() bool { return ks == nil || len(ks.digests) == 0 }

func (ks *keySet) valid(key string) bool {
	if key == "" {
		return false
	}
	d := sha256.Sum256([]byte(key))
	ok := 0
	for i := range ks.digests {
		ok |= subtle.ConstantTimeCompare(d[:], ks.digests[i][:])
	}
	return ok == 1
}

// ReadKeysFile reads API keys, one per line; blank lines and lines starting
// with # are ignored.
func ReadKeysFile(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--api-keys-file: %w", err)
	}
	defer f.Close()
	var keys []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			keys = append(keys, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--api-keys-file: %w", err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("--api-keys-file %s holds no key", path)
	}
	return keys, nil
}

// requestKey extracts the client's key: "Authorization: Bearer KEY"
// (OpenAI clients) or "x-api-key: KEY" (Anthropic clients).
func requestKey(c *fiber.Ctx) string {
	if h := c.Get(fiber.HeaderAuthorization); h != "" {
		if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
			return strings.TrimSpace(h[7:])
		}
		return ""
	}
	return strings.TrimSpace(c.Get("x-api-key"))
}

// authMiddleware rejects requests without a valid key, except the open
// paths (health checks must work for load balancers that hold no key).
func (s *Server) authMiddleware(c *fiber.Ctx) error {
	if s.keys.empty() || c.Path() == "/health" || c.Method() == fiber.MethodOptions {
		return c.Next()
	}
	if !s.keys.valid(requestKey(c)) {
		return errUnauthorized
	}
	return c.Next()
}
