package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/infernix/infernix/engine/convert"
	"github.com/infernix/infernix/engine/gguf"
)

func init() {
	register("convert", "write a Hugging Face Qwen3 / Qwen3-MoE directory as one GGUF file", cmdConvert)
}

// cmdConvert is convert_hf_to_gguf.py plus llama-quantize in one step, for
// moving a checkpoint to llama.cpp (or to one file): every matrix in the
// asked type, vectors in F32.
func cmdConvert(args []string, stdout io.Writer) error {
	fs := newFlags("convert")
	dir := fs.String("model", "", "Hugging Face model directory")
	out := fs.String("out", "", "GGUF file to write")
	typ := fs.String("type", "bf16", "matrix type: f32, f16, bf16, q8_0, q6_k, q5_k, q5_1, q5_0, q4_k, q4_1, q4_0, q3_k, q2_k (the k-quants and q4/q5 use plain round-to-nearest scales, not llama-quantize's search)")
	probe := fs.Bool("embedding-probe", false, "write a test model instead: zero layers, an F32 copy of the embedding as the head (logits depend on one embedding row, read in --type; see tests/reference/gguf)")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		return fmt.Errorf("--model DIR and --out FILE are required")
	}
	if st, err := os.Stat(*dir); err != nil {
		return fmt.Errorf("model %s not found", *dir)
	} else if !st.IsDir() {
		return fmt.Errorf("--model %s: convert reads a Hugging Face model directory, not a file", *dir)
	}
	t, ok := gguf.ParseType(*typ)
	if !ok {
		return fmt.Errorf("--type %q: expected one of %s", *typ, gguf.SupportedTypes())
	}
	t0 := time.Now()
	if err := convert.Write(*dir, *out, convert.Options{Type: t, EmbeddingProbe: *probe}); err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %.1f MiB in %s\n", *out, t, float64(st.Size())/(1<<20), time.Since(t0).Round(time.Millisecond))
	return nil
}
