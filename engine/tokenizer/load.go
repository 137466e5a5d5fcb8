package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"golang.org/x/text/unicode/norm"
)

// The subset of tokenizer.json this package reads, as decodeFile fills it.
type jsonFile struct {
	AddedTokens  []jsonAddedToken
	Normalizer   json.RawMessage
	PreTokenizer json.RawMessage
	Decoder      json.RawMessage
	Model        *jsonModel
}

type jsonAddedToken struct {
	ID         int64  `json:"id"` // ignored, as HF ignores it (see addTokens)
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

type jsonModel struct {
	Type                    string          `json:"type"`
	Dropout                 *float64        `json:"dropout"`
	UnkToken                *string         `json:"unk_token"`
	ContinuingSubwordPrefix *string         `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string         `json:"end_of_word_suffix"`
	FuseUnk                 bool            `json:"fuse_unk"`
	ByteFallback            bool            `json:"byte_fallback"`
	IgnoreMerges            bool            `json:"ignore_merges"`
	Vocab                   json.RawMessage `json:"-"` // read by scanVocab
	Merges                  json.RawMessage `json:"-"` // read by scanMerges
}

type jsonComponent struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Pattern        json.RawMessage   `json:"pattern"`
	Behavior       string            `json:"behavior"`
	Invert         bool              `json:"invert"`
	AddPrefixSpace bool              `json:"add_prefix_space"`
	UseRegex       *bool             `json:"use_regex"`
}

// Load reads a tokenizer.json file; path may also name the directory that
// holds it.
func Load(path string) (*Tokenizer, error) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		path = filepath.Join(path, "tokenizer.json")
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return t, nil
}

// Parse builds a tokenizer from the contents of a Hugging Face tokenizer.json
// holding a byte-level BPE model. Components it cannot reproduce exactly
// (another model, normalizer, pre-tokenizer, split pattern or decoder) are
// reported as errors naming them. The post-processor is ignored: Encode never
// adds BOS/EOS or other template tokens.
func Parse(data []byte) (*Tokenizer, error) {
	f, err := decodeFile(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: invalid tokenizer.json: %w", err)
	}
	t := &Tokenizer{unkID: -1, cache: newWordCache()}
	if err := t.parseModel(f.Model); err != nil {
		return nil, err
	}
	if t.normForms, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if err := t.parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, err
	}
	if err := t.addTokens(f.AddedTokens); err != nil {
		return nil, err
	}
	t.buildTables()
	return t, nil
}

// decodeFile splits tokenizer.json with the fast scanner, so that the vocab
// and merges never go through reflection, and decodes the small parts with
// encoding/json.
func decodeFile(data []byte) (*jsonFile, error) {
	top, err := scanObject(data)
	if err != nil {
		return nil, err
	}
	f := &jsonFile{Normalizer: top["normalizer"], PreTokenizer: top["pre_tokenizer"], Decoder: top["decoder"]}
	if raw := top["added_tokens"]; !isNull(raw) {
		if err := json.Unmarshal(raw, &f.AddedTokens); err != nil {
			return nil, fmt.Errorf("added_tokens: %w", err)
		}
	}
	if raw := top["model"]; !isNull(raw) {
		members, err := scanObject(raw)
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
		f.Model = &jsonModel{Vocab: members["vocab"], Merges: members["merges"]}
		delete(members, "vocab")
		delete(members, "merges")
		small, err := json.Marshal(members)
		if err == nil {
			err = json.Unmarshal(small, f.Model)
		}
		if err != nil {
			return nil, fmt.Errorf("model: %w", err)
		}
	}
	return f, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func (t *Tokenizer) parseModel(m *jsonModel) error {
	if m == nil {
		return errors.New("tokenizer: tokenizer.json has no model")
	}
	if m.Type != "BPE" && m.Type != "" {
		return fmt.Errorf("tokenizer: unsupported model type %q (only BPE)", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return fmt.Errorf("tokenizer: unsupported BPE dropout %v", *m.Dropout)
	}
	if m.ByteFallback {
		return errors.New("tokenizer: unsupported BPE byte_fallback")
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return fmt.Errorf("tokenizer: unsupported BPE continuing_subword_prefix %q", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return fmt.Errorf("tokenizer: unsupported BPE end_of_word_suffix %q", *m.EndOfWordSuffix)
	}
	// The merges are scanned while the vocab is built: both take a while
	// for large vocabularies, and only resolving merges needs the vocab.
	type scanned struct {
		pairs [][2]string
		err   error
	}
	mergesDone := make(chan scanned, 1)
	go func() {
		pairs, err := scanMerges(m.Merges)
		mergesDone <- scanned{pairs, err}
	}()
	t.vocab = make(map[string]int32, len(m.Vocab)/16) // ~16 bytes per entry
	maxID := int64(-1)
	err := scanVocab(m.Vocab, func(tok string, id int64) error {
		if id < 0 || id >= math.MaxInt32/2 {
			return fmt.Errorf("vocab token %q has invalid id %d", tok, id)
		}
		t.vocab[tok] = int32(id)
		maxID = max(maxID, id)
		return nil
	})
	if err != nil {
		return fmt.Errorf("tokenizer: invalid vocab: %w", err)
	}
	t.modelVocabLen = len(t.vocab)
	// Ids index dense tables; a sparse id space would make them huge.
	if maxID >= 2*int64(len(t.vocab))+1<<16 {
		return fmt.Errorf("tokenizer: vocab ids are too sparse (max id %d for %d tokens)", maxID, len(t.vocab))
	}
	t.vocabSize = int(maxID + 1)
	t.ignoreMerges = m.IgnoreMerges
	t.fuseUnk = m.FuseUnk
	if m.UnkToken != nil {
		id, ok := t.vocab[*m.UnkToken]
		if !ok {
			return fmt.Errorf("tokenizer: unk_token %q is not in the vocab", *m.UnkToken)
		}
		t.unkID = id
	}
	sm := <-mergesDone
	if sm.err != nil {
		return fmt.Errorf("tokenizer: invalid merges: %w", sm.err)
	}
	pairs := sm.pairs
	t.merges = make(map[uint64]merge, len(pairs))
	var cat []byte
	for rank, p := range pairs {
		a, okA := t.vocab[p[0]]
		b, okB := t.vocab[p[1]]
		cat = append(append(cat[:0], p[0]...), p[1]...)
		c, okC := t.vocab[string(cat)] // no allocation for a lookup
		if !okA || !okB || !okC {
			return fmt.Errorf("tokenizer: merge %q %q uses a token missing from the vocab", p[0], p[1])
		}
		// A repeated pair keeps its last rank, as HF's merge map does.
		t.merges[pairKey(a, b)] = merge{rank: int32(rank), id: c}
	}
	return nil
}

func parseNormalizer(raw json.RawMessage) ([]norm.Form, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c jsonComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("tokenizer: invalid normalizer: %w", err)
	}
	switch c.Type {
	case "NFC":
		return []norm.Form{norm.NFC}, nil
	case "NFD":
		return []norm.Form{norm.NFD}, nil
	case "NFKC":
		return []norm.Form{norm.NFKC}, nil
	case "NFKD":
		return []norm.Form{norm.NFKD}, nil
	case "Sequence":
		var forms []norm.Form
		for _, sub := range c.Normalizers {
			f, err := parseNormalizer(sub)
			if err != nil {
				return nil, err
			}
			forms = append(forms, f...)
		}
		return forms, nil
	}
	return nil, fmt.Errorf("tokenizer: unsupported normalizer type %q", c.Type)
}

func (t *Tokenizer) parsePreTokenizer(raw json.RawMessage) error {
	if err := t.addPreStep(raw); err != nil {
		return err
	}
	if !t.byteLevel {
		return errors.New("tokenizer: pre_tokenizer has no ByteLevel step (only byte-level BPE is supported)")
	}
	return nil
}

func (t *Tokenizer) addPreStep(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var c jsonComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer: invalid pre_tokenizer: %w", err)
	}
	switch c.Type {
	case "Sequence":
		for _, sub := range c.Pretokenizers {
			if err := t.addPreStep(sub); err != nil {
				return err
			}
		}
		return nil
	case "ByteLevel":
		t.byteLevel = true
		st := preStep{prefixSpace: c.AddPrefixSpace}
		if c.UseRegex == nil || *c.UseRegex {
			st.split = knownSplitters[patGPT2]
		}
		if st.prefixSpace || st.split != nil {
			t.steps = append(t.steps, st)
		}
		return nil
	case "Split":
		var pat struct {
			Regex  *string
			String *string
		}
		if err := json.Unmarshal(c.Pattern, &pat); err != nil || pat.Regex == nil {
			return fmt.Errorf("tokenizer: unsupported Split pattern %s (only known regexes)", c.Pattern)
		}
		sp, ok := knownSplitters[*pat.Regex]
		if !ok {
			return fmt.Errorf("tokenizer: unsupported Split regex %q", *pat.Regex)
		}
		if c.Behavior != "Isolated" || c.Invert {
			return fmt.Errorf("tokenizer: unsupported Split behavior %q (invert=%v); only Isolated", c.Behavior, c.Invert)
		}
		t.steps = append(t.steps, preStep{split: sp})
		return nil
	}
	return fmt.Errorf("tokenizer: unsupported pre_tokenizer type %q", c.Type)
}

func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return errors.New("tokenizer: no decoder (only ByteLevel is supported)")
	}
	var c jsonComponent
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("tokenizer: invalid decoder: %w", err)
	}
	if c.Type != "ByteLevel" {
		return fmt.Errorf("tokenizer: unsupported decoder type %q (only ByteLevel)", c.Type)
	}
	return nil
}

// addTokens registers added tokens as HF's AddedVocabulary.add_tokens does
// when it loads tokenizer.json: a token whose content is already known (an
// added token or a vocab entry) takes that id, any other takes the next free
// id after the model's vocabulary; the "id" written in the file is only a
// hint there, and it is here too.
func (t *Tokenizer) addTokens(list []jsonAddedToken) error {
	byContent := map[string]*addedToken{}
	t.specialSet = map[string]bool{}
	maxAdded := int64(-1)
	for _, j := range list {
		if j.Content == "" {
			continue
		}
		normalized := !j.Special // HF's default when the field is absent
		if j.Normalized != nil {
			normalized = *j.Normalized
		}
		a := &addedToken{content: j.Content, special: j.Special, lstrip: j.LStrip, rstrip: j.RStrip,
			normalized: normalized, singleWord: j.SingleWord}
		if j.Special {
			t.specialSet[j.Content] = true
		}
		if old, ok := byContent[j.Content]; ok {
			a.id = old.id
			*old = *a
			continue
		}
		if id, ok := t.vocab[j.Content]; ok {
			a.id = id
		} else {
			next := int64(t.modelVocabLen)
			if maxAdded >= 0 && (maxAdded >= next || t.modelVocabLen == 0) {
				next = maxAdded + 1
			}
			if next >= math.MaxInt32/2 {
				return fmt.Errorf("tokenizer: too many added tokens")
			}
			a.id = int32(next)
		}
		maxAdded = max(maxAdded, int64(a.id))
		byContent[j.Content] = a
		t.added = append(t.added, a)
	}
	t.addedIDs = make(map[string]int32, len(byContent))
	for c, a := range byContent {
		t.addedIDs[c] = a.id
	}
	var raw, normed []*addedToken
	for _, a := range t.added {
		if a.normalized {
			normed = append(normed, a)
		} else {
			raw = append(raw, a)
		}
	}
	t.rawMatcher = newAddedMatcher(raw, func(a *addedToken) string { return a.content })
	t.normMatcher = newAddedMatcher(normed, func(a *addedToken) string { return t.normalize(a.content) })
	return nil
}
