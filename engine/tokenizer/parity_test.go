package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The fixtures are written by tests/reference/tokenizer_cases.py with the HF
// tokenizers library (see tests/testdata/tokenizer/SOURCE.md).

type parityCase struct {
	Text        string  `json:"text"`
	IDs         []int32 `json:"ids"`
	Decoded     string  `json:"decoded"`
	DecodedSkip string  `json:"decoded_skip"`
}

type decodeCase struct {
	IDs         []int32 `json:"ids"`
	Decoded     string  `json:"decoded"`
	DecodedSkip string  `json:"decoded_skip"`
}

type casesFile struct {
	Version     string       `json:"tokenizers_version"`
	Generator   string       `json:"generator"`
	Cases       []parityCase `json:"cases"`
	DecodeCases []decodeCase `json:"decode_cases"`
}

type variantPatch struct {
	PreTokenizer      json.RawMessage `json:"pre_tokenizer"`
	Normalizer        json.RawMessage `json:"normalizer"`
	MergesAsStrings   bool            `json:"merges_as_strings"`
	IgnoreMerges      *bool           `json:"ignore_merges"`
	AddedTokensAppend json.RawMessage `json:"added_tokens_append"`
}

type variantsFile struct {
	Version  string `json:"tokenizers_version"`
	Variants []struct {
		Name  string          `json:"name"`
		Patch json.RawMessage `json:"patch"`
		Cases []parityCase    `json:"cases"`
	} `json:"variants"`
}

// readFixture decodes a fixture file, skipping the test when it is absent.
func readFixture(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixtureDir, name))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skipf("fixture %s absent: run tests/reference/tokenizer_cases.py OUTDIR and copy it to tests/testdata/tokenizer/", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

func checkCases(t *testing.T, tk *Tokenizer, cases []parityCase) {
	t.Helper()
	fails := 0
	for _, c := range cases {
		got := tk.Encode(c.Text)
		if !slices.Equal(got, c.IDs) {
			fails++
			t.Errorf("Encode(%q)\n got %v\nwant %v", c.Text, got, c.IDs)
		}
		if d := tk.Decode(c.IDs, false); d != c.Decoded {
			fails++
			t.Errorf("Decode(%v, false) = %q, want %q", c.IDs, d, c.Decoded)
		}
		if d := tk.Decode(c.IDs, true); d != c.DecodedSkip {
			fails++
			t.Errorf("Decode(%v, true) = %q, want %q", c.IDs, d, c.DecodedSkip)
		}
		if fails > 20 {
			t.Fatal("too many failures")
		}
	}
}

func TestParityQwen3(t *testing.T) {
	var f casesFile
	readFixture(t, "qwen3_cases.json", &f)
	if len(f.Cases) < 300 {
		t.Fatalf("fixture has %d cases, want >= 300", len(f.Cases))
	}
	t.Logf("%d cases from %s", len(f.Cases), f.Generator)
	tk := qwen3(t)
	checkCases(t, tk, f.Cases)
	for _, c := range f.DecodeCases {
		if d := tk.Decode(c.IDs, false); d != c.Decoded {
			t.Errorf("Decode(%v, false) = %q, want %q", c.IDs, d, c.Decoded)
		}
		if d := tk.Decode(c.IDs, true); d != c.DecodedSkip {
			t.Errorf("Decode(%v, true) = %q, want %q", c.IDs, d, c.DecodedSkip)
		}
		for _, skip := range []bool{false, true} {
			want := c.Decoded
			if skip {
				want = c.DecodedSkip
			}
			if got := streamAll(tk, c.IDs, skip); got != want {
				t.Errorf("stream decode(%v, %v) = %q, want %q", c.IDs, skip, got, want)
			}
		}
	}
}

func streamAll(tk *Tokenizer, ids []int32, skip bool) string {
	d := tk.NewStreamDecoder(skip)
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(d.Add(id))
	}
	b.WriteString(d.Flush())
	return b.String()
}

func TestParityVariants(t *testing.T) {
	var f variantsFile
	readFixture(t, "variants_cases.json", &f)
	if len(f.Variants) == 0 {
		t.Fatal("no variants in fixture")
	}
	for _, v := range f.Variants {
		t.Run(v.Name, func(t *testing.T) {
			data, err := applyVariantPatch(qwen3Raw(t), v.Patch)
			if err != nil {
				t.Fatal(err)
			}
			tk, err := Parse(data)
			if err != nil {
				t.Fatal(err)
			}
			checkCases(t, tk, v.Cases)
		})
	}
}

// applyVariantPatch mirrors apply_patch in tests/reference/tokenizer_cases.py.
func applyVariantPatch(base []byte, rawPatch json.RawMessage) ([]byte, error) {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(rawPatch, &keys); err != nil {
		return nil, err
	}
	var p variantPatch
	if err := json.Unmarshal(rawPatch, &p); err != nil {
		return nil, err
	}
	top, err := scanObject(base) // the fast scanner: encoding/json is slow on 11 MB
	if err != nil {
		return nil, err
	}
	if _, ok := keys["pre_tokenizer"]; ok {
		top["pre_tokenizer"] = p.PreTokenizer
	}
	if _, ok := keys["normalizer"]; ok {
		top["normalizer"] = orNull(p.Normalizer)
	}
	if p.MergesAsStrings || p.IgnoreMerges != nil {
		model, err := scanObject(top["model"])
		if err != nil {
			return nil, err
		}
		if p.MergesAsStrings {
			var pairs [][]string
			if err := json.Unmarshal(model["merges"], &pairs); err != nil {
				return nil, err
			}
			lines := make([]string, len(pairs))
			for i, pr := range pairs {
				lines[i] = strings.Join(pr, " ")
			}
			b, err := json.Marshal(lines)
			if err != nil {
				return nil, err
			}
			model["merges"] = b
		}
		if p.IgnoreMerges != nil {
			model["ignore_merges"], _ = json.Marshal(*p.IgnoreMerges)
		}
		top["model"] = joinObject(model)
	}
	if len(p.AddedTokensAppend) > 0 {
		var base, extra []json.RawMessage
		if err := json.Unmarshal(top["added_tokens"], &base); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(p.AddedTokensAppend, &extra); err != nil {
			return nil, err
		}
		b, err := json.Marshal(append(base, extra...))
		if err != nil {
			return nil, err
		}
		top["added_tokens"] = b
	}
	return joinObject(top), nil
}

// joinObject writes members back as a JSON object without re-validating
// their (already valid) values, which json.Marshal would do at length.
func joinObject(members map[string]json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for k, v := range members {
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		key, _ := json.Marshal(k)
		b.Write(key)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func orNull(r json.RawMessage) json.RawMessage {
	if len(r) == 0 {
		return json.RawMessage("null")
	}
	return r
}
