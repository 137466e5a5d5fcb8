package tokenizer

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Paths of vendored data, relative to this package's directory.
var (
	qwen3Dir       = filepath.Join("..", "..", "tests", "testdata", "qwen3-tokenizer")
	qwen3JSON      = filepath.Join(qwen3Dir, "tokenizer.json")
	fixtureDir     = filepath.Join("..", "..", "tests", "testdata", "tokenizer")
	qwen3Once      sync.Once
	qwen3Tok       *Tokenizer
	qwen3Err       error
	qwen3RawOnce   sync.Once
	qwen3RawData   []byte
	qwen3RawDataEr error
)

// qwen3 returns the vendored Qwen3 tokenizer, loaded once per test binary.
func qwen3(tb testing.TB) *Tokenizer {
	tb.Helper()
	qwen3Once.Do(func() { qwen3Tok, qwen3Err = Load(qwen3Dir) })
	if qwen3Err != nil {
		tb.Fatalf("load qwen3 tokenizer: %v", qwen3Err)
	}
	return qwen3Tok
}

// qwen3Raw returns the bytes of the vendored tokenizer.json.
func qwen3Raw(tb testing.TB) []byte {
	tb.Helper()
	qwen3RawOnce.Do(func() { qwen3RawData, qwen3RawDataEr = os.ReadFile(qwen3JSON) })
	if qwen3RawDataEr != nil {
		tb.Fatal(qwen3RawDataEr)
	}
	return qwen3RawData
}
