package sample

import (
	"encoding/json"
	"errors"
	"io/fs"
	"math"
	"os"
	"strconv"
	"testing"
)

// jsonFloat decodes a JSON number, or "-Inf"/"+Inf" (JSON has no
// infinities).
type jsonFloat float64

func (f *jsonFloat) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		v, err := strconv.ParseFloat(s, 64)
		*f = jsonFloat(v)
		return err
	}
	var v float64
	err := json.Unmarshal(b, &v)
	*f = jsonFloat(v)
	return err
}

type hfCase struct {
	Name   string      `json:"name"`
	Logits []jsonFloat `json:"logits"`
	Params struct {
		Temperature       float32            `json:"temperature"`
		TopK              int                `json:"top_k"`
		TopP              float32            `json:"top_p"`
		MinP              float32            `json:"min_p"`
		RepetitionPenalty float32            `json:"repetition_penalty"`
		PresencePenalty   float32            `json:"presence_penalty"`
		FrequencyPenalty  float32            `json:"frequency_penalty"`
		LogitBias         map[string]float32 `json:"logit_bias"`
		Prompt            []int32            `json:"prompt"`
		Output            []int32            `json:"output"`
	} `json:"params"`
	Probs    []float64   `json:"probs"`
	LogProbs []jsonFloat `json:"logprobs"`
}

// TestHFReference compares the planned distribution and log-probabilities
// with Hugging Face transformers' logits processors, recorded by
// testdata/hf_reference.py (see testdata/SOURCE.md).
func TestHFReference(t *testing.T) {
	raw, err := os.ReadFile("testdata/hf_reference.json")
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("testdata/hf_reference.json not generated yet: run testdata/hf_reference.py where transformers is installed")
	}
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Meta  map[string]any `json:"meta"`
		Cases []hfCase       `json:"cases"`
	}
	if err := json.Unmarshal(raw, &ref); err != nil {
		t.Fatal(err)
	}
	if ref.Meta["dry_run"] == true || len(ref.Cases) == 0 {
		t.Fatalf("reference file holds no transformers results: %v", ref.Meta)
	}
	for _, c := range ref.Cases {
		t.Run(c.Name, func(t *testing.T) {
			logits := make([]float32, len(c.Logits))
			for i, x := range c.Logits {
				logits[i] = float32(x)
			}
			cp := c.Params
			p := Params{
				Temperature: cp.Temperature, TopK: cp.TopK, TopP: cp.TopP, MinP: cp.MinP,
				RepetitionPenalty: cp.RepetitionPenalty, PresencePenalty: cp.PresencePenalty,
				FrequencyPenalty: cp.FrequencyPenalty, LogitBias: map[int32]float32{},
			}
			for k, b := range cp.LogitBias {
				id, err := strconv.Atoi(k)
				if err != nil {
					t.Fatal(err)
				}
				p.LogitBias[int32(id)] = b
			}
			if err := p.ValidateVocab(len(logits)); err != nil {
				t.Fatal(err)
			}
			s := New(p, len(logits), cp.Prompt)
			for _, tok := range cp.Output {
				s.Accept(tok)
			}
			got := implProbs(s, logits)
			if len(c.Probs) != len(logits) || len(c.LogProbs) != len(logits) {
				t.Fatalf("reference has %d probs, %d logprobs for %d logits", len(c.Probs), len(c.LogProbs), len(logits))
			}
			for i, want := range c.Probs {
				// float32 weights below ~1e-38 are 0 on one side or the other.
				support := (want == 0) != (got[i] == 0) && max(want, got[i]) > 1e-30
				if support || math.Abs(want-got[i]) > 1e-5 {
					t.Fatalf("token %d: prob %.8g, transformers %.8g (params %+v)", i, got[i], want, cp)
				}
			}
			for i, want := range c.LogProbs {
				lp := LogProbOf(logits, int32(i))
				if !(float64(lp) == float64(want) || math.Abs(float64(lp)-float64(want)) < 1e-5) {
					t.Fatalf("token %d: logprob %v, torch %v", i, lp, want)
				}
			}
		})
	}
}
