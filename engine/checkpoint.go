package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/gguf"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
	"github.com/infernix/infernix/engine/tokenizer"
)

// checkpoint is what Load needs of a model on disk, whichever format holds
// it: a Hugging Face directory (config.json, safetensors, tokenizer files)
// or one GGUF file.
type checkpoint struct {
	cfg         *model.Config
	configName  string // where the config came from, for messages
	gen         *model.GenerationConfig
	loadedBytes int64 // the weights' size once loaded (0: synthetic, sized later)
	weights     func(be backend.Backend) model.WeightSource
	text        func(templateFile string) (*Text, error)
	fingerprint func() []byte
	close       func() error
}

// openCheckpoint opens path: a GGUF file, a directory with config.json, or
// a directory holding exactly one .gguf file.
func openCheckpoint(path string, opt Options) (*checkpoint, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("model directory: %w", err)
	}
	if !st.IsDir() && !isGGUF(path) {
		return nil, fmt.Errorf("model %s is not a directory (nor a .gguf file)", path)
	}
	if g, ok := ggufPath(path); ok {
		return openGGUF(g, opt)
	}
	if _, err := os.Stat(filepath.Join(path, "config.json")); os.IsNotExist(err) {
		if g, _ := filepath.Glob(filepath.Join(path, "*.gguf")); len(g) > 1 {
			return nil, fmt.Errorf("model directory %s has no config.json and %d .gguf files: name one", path, len(g))
		}
	}
	return openHFDir(path, opt)
}

func isGGUF(path string) bool { return strings.EqualFold(filepath.Ext(path), ".gguf") }

// ggufPath is the GGUF file path names: path itself, or the one .gguf file
// of a directory without config.json.
func ggufPath(path string) (string, bool) {
	st, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	if !st.IsDir() {
		return path, isGGUF(path)
	}
	if _, err := os.Stat(filepath.Join(path, "config.json")); err == nil {
		return "", false
	}
	if g, _ := filepath.Glob(filepath.Join(path, "*.gguf")); len(g) == 1 {
		return g[0], true
	}
	return "", false
}

func openHFDir(dir string, opt Options) (*checkpoint, error) {
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		return nil, err
	}
	if _, err := model.Lookup(cfg.Arch()); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	gen, err := model.LoadGenerationConfig(dir)
	if err != nil {
		return nil, err
	}
	ck := &checkpoint{cfg: cfg, gen: gen, configName: filepath.Join(dir, "config.json"), close: func() error { return nil }}
	ck.text = func(templateFile string) (*Text, error) { return LoadText(dir, templateFile) }
	if opt.SyntheticWeights {
		ck.weights = func(be backend.Backend) model.WeightSource { return &model.SyntheticWeights{Be: be, Seed: 1} }
		ck.fingerprint = func() []byte { return Fingerprint(cfg, nil, 1) }
		return ck, nil
	}
	set, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	ck.loadedBytes = set.Bytes()
	ck.weights = func(be backend.Backend) model.WeightSource { return &model.FileWeights{Set: set, Be: be} }
	ck.fingerprint = func() []byte { return Fingerprint(cfg, set, 1) }
	ck.close = set.Close
	return ck, nil
}

func openGGUF(path string, opt Options) (*checkpoint, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*checkpoint, error) {
		f.Close()
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	raw, err := model.GGUFConfig(f)
	if err != nil {
		return fail(err)
	}
	cfg, err := model.ParseConfig(raw)
	if err != nil {
		return fail(err)
	}
	ck := &checkpoint{cfg: cfg, gen: model.GGUFGenerationConfig(f), configName: path + " (metadata)", close: f.Close,
		loadedBytes: model.GGUFLoadedBytes(f)}
	ck.weights = func(be backend.Backend) model.WeightSource { return &model.GGUFWeights{File: f, Be: be} }
	ck.fingerprint = func() []byte { return FingerprintGGUF(cfg, f) }
	if opt.SyntheticWeights {
		ck.loadedBytes = 0
		ck.weights = func(be backend.Backend) model.WeightSource { return &model.SyntheticWeights{Be: be, Seed: 1} }
		ck.fingerprint = func() []byte { return Fingerprint(cfg, nil, 1) }
	}
	ck.text = func(templateFile string) (*Text, error) {
		t, err := ggufText(f, templateFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		return t, nil
	}
	return ck, nil
}

// ggufText rebuilds the tokenizer, its config and the chat template from a
// GGUF file's metadata.
func ggufText(f *gguf.File, templateFile string) (*Text, error) {
	if _, ok := f.Meta["tokenizer.ggml.model"]; !ok {
		t := &Text{} // no tokenizer: token ids only, like a directory without tokenizer.json
		return t, t.compileTemplate("", templateFile)
	}
	doc, err := f.TokenizerJSON()
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.Parse(doc)
	if err != nil {
		return nil, err
	}
	tc := &tokenizer.Config{
		EOSToken: f.TokenString("tokenizer.ggml.eos_token_id"),
		PadToken: f.TokenString("tokenizer.ggml.padding_token_id"),
	}
	// llama.cpp's converter records a BOS id even for models that have none
	// (Qwen's config says null; the GGUF names <|endoftext|>), so it counts
	// only where the file says to add it.
	if tc.AddBOSToken, _ = f.Meta["tokenizer.ggml.add_bos_token"].Bool(); tc.AddBOSToken {
		tc.BOSToken = f.TokenString("tokenizer.ggml.bos_token_id")
	}
	tc.ChatTemplate, _ = f.Meta["tokenizer.chat_template"].Str()
	for _, k := range f.Keys {
		if name, ok := strings.CutPrefix(k, "tokenizer.chat_template."); ok {
			if tc.ChatTemplates == nil {
				tc.ChatTemplates = map[string]string{"default": tc.ChatTemplate}
			}
			tc.ChatTemplates[name], _ = f.Meta[k].Str()
		}
	}
	t := &Text{Tokenizer: tok, TokConfig: tc}
	if err := t.compileTemplate(tc.ChatTemplate, templateFile); err != nil {
		return nil, err
	}
	return t, nil
}
