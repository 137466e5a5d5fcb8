// Package engine loads a model (a Hugging Face directory or a GGUF file) and serves generations from it: it
// wires the checkpoint, the backend, the architecture, the tokenizer, the chat
// template and the scheduler. The server and the CLI talk to an *Engine.
package engine

import (
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cpu"
	"github.com/infernix/infernix/engine/backend/cuda"
	"github.com/infernix/infernix/engine/chat"
	"github.com/infernix/infernix/engine/gguf"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/sched"
	"github.com/infernix/infernix/engine/tokenizer"

	_ "github.com/infernix/infernix/engine/arch/qwen3" // registers Qwen3 and Qwen3-MoE
	_ "github.com/infernix/infernix/engine/arch/qwen3next"
)

// Options configure loading.
type Options struct {
	Device           string // auto, cpu, cuda
	Threads          int    // CPU threads (0 = all cores)
	ContextLength    int    // longest sequence (0 = the model's, capped at 32768)
	KVBlocks         int    // KV blocks in the pool (0 = enough for MaxLanes full contexts, capped by memory)
	MaxBatchTokens   int    // largest forward (0 = 512)
	SyntheticWeights bool   // random weights of the configured shapes (benchmarks)
	ChatTemplate     string // a template file overriding the model's
	Sched            sched.Config
	// GPUMemoryFraction is the share of the device's free memory the engine
	// may use for weights and KV (0 = 0.9).
	GPUMemoryFraction float64

	// Prefix cache (engine/prefix). NoPrefixReuse turns reuse and its
	// persistence off. Persist (nil = none) keeps blocks across restarts.
	// HostCacheMiB holds blocks evicted from the device pool in host memory.
	NoPrefixReuse bool
	HostCacheMiB  int
	Persist       Persister
}

// Text is a model directory's text side: tokenizer, its config and the chat
// template. Each may be nil when the directory lacks it.
type Text struct {
	Tokenizer      *tokenizer.Tokenizer
	TokConfig      *tokenizer.Config
	Template       *chat.Template
	TemplateSource string
}

// Engine is a loaded model ready to generate.
type Engine struct {
	*Text
	Dir         string
	Config      *model.Config
	Gen         *model.GenerationConfig
	Model       model.Model
	Backend     backend.Backend
	Sched       *sched.Scheduler
	WeightBytes int64
	// DecodeBytes is what of WeightBytes one lane's decode step reads (the
	// numerator of its memory roofline; model.Unread says what it skips).
	DecodeBytes int64
	ck          *checkpoint
	// Persist is the data directory (nil without one); PrefixTier its
	// prefix-cache tier for this model (nil when not persisted).
	Persist    Persister
	PrefixTier PrefixTier
}

// Load reads a Hugging Face model directory, or a GGUF file (or a
// directory holding one GGUF file and no config.json).
func Load(path string, opt Options) (*Engine, error) {
	ck, err := openCheckpoint(path, opt)
	if err != nil {
		return nil, err
	}
	cfg := ck.cfg
	build, err := model.Lookup(cfg.Arch())
	if err != nil {
		ck.close()
		return nil, fmt.Errorf("%s: %w", ck.configName, err)
	}
	e := &Engine{Dir: path, Config: cfg, Gen: ck.gen, ck: ck}
	be, err := newBackend(opt)
	if err != nil {
		ck.close()
		return nil, err
	}
	e.Backend = be
	tc := cfg.Text() // sizes come from the language model's config
	ctx := opt.ContextLength
	if ctx <= 0 {
		ctx = min(tc.MaxPositionEmbeddings, 32768)
	}
	ctx = min(ctx, tc.MaxPositionEmbeddings)
	lanes := opt.Sched.MaxLanes
	if lanes <= 0 {
		lanes = 4
	}
	blocks := opt.KVBlocks
	if blocks <= 0 {
		blocks = lanes * ((ctx + backend.BlockSize - 1) / backend.BlockSize)
		// Bound the pool by memory (f32 KV on the CPU, bf16 on a device).
		elem := int64(4)
		if _, onDevice := be.(backend.MemoryReporter); onDevice {
			elem = 2
		}
		perBlock := int64(tc.NumHiddenLayers) * 2 * backend.BlockSize * int64(tc.NumKeyValueHeads*tc.HeadDim) * elem
		if limit := int(kvBudget(be, ck.loadedBytes, opt.GPUMemoryFraction) / max(perBlock, 1)); blocks > limit {
			blocks = max(limit, (ctx+backend.BlockSize-1)/backend.BlockSize)
		}
	}
	mopt := model.Options{KVBlocks: blocks, MaxBatchTokens: opt.MaxBatchTokens}
	if mopt.MaxBatchTokens <= 0 {
		mopt.MaxBatchTokens = 512
	}
	ws := ck.weights(be)
	e.WeightBytes = ck.loadedBytes
	if e.Model, err = build(cfg, ws, be, mopt); err != nil {
		e.Close()
		return nil, fmt.Errorf("loading %s: %w", path, err)
	}
	switch w := ws.(type) {
	case *model.SyntheticWeights:
		e.WeightBytes = w.Bytes
	case *model.GGUFWeights:
		e.WeightBytes = w.Bytes
	}
	e.DecodeBytes = e.WeightBytes
	if u, ok := e.Model.(model.Unread); ok {
		e.DecodeBytes = max(e.WeightBytes-u.UnreadPerToken(), 1)
	}
	if e.Text, err = ck.text(opt.ChatTemplate); err != nil {
		e.Close()
		return nil, err
	}
	sc := opt.Sched
	if r, ok := be.(backend.DeviceThreadRunner); ok {
		sc.Runner = r.RunOnDeviceThread
	}
	sc.MaxLanes = lanes
	sc.MaxContext = ctx
	sc.NoPrefixReuse = sc.NoPrefixReuse || opt.NoPrefixReuse
	sc.PrefixSeed = ck.fingerprint()
	if err := e.openStore(opt, &sc); err != nil {
		e.Close()
		return nil, err
	}
	e.Sched = sched.New(e.Model, sc)
	return e, nil
}

// newBackend picks the device: auto tries CUDA and falls back to the CPU
// with one log line saying why.
func newBackend(opt Options) (backend.Backend, error) {
	switch dev := strings.ToLower(opt.Device); dev {
	case "cpu":
		return cpu.New(opt.Threads), nil
	case "", "auto", "cuda":
		be, err := cuda.New(cuda.Options{})
		if err == nil {
			return be, nil
		}
		if dev == "cuda" {
			return nil, fmt.Errorf("--device cuda: %w", err)
		}
		log.Printf("infernix: no usable CUDA device, running on the CPU: %v", oneLine(err))
		return cpu.New(opt.Threads), nil
	default:
		return nil, fmt.Errorf("--device %q: expected auto, cpu or cuda", opt.Device)
	}
}

func oneLine(err error) string { return strings.Join(strings.Fields(err.Error()), " ") }

// kvBudget is the memory the KV pool may take: 4 GiB of host memory on the
// CPU; on a device, the --gpu-memory-fraction of what is free less the
// weights and a margin for activations and the CUDA workspace.
func kvBudget(be backend.Backend, weightBytes int64, fraction float64) int64 {
	if fraction <= 0 || fraction > 1 {
		fraction = 0.9
	}
	if mr, ok := be.(backend.MemoryReporter); ok {
		if free, _, _, err := mr.Memory(); err == nil {
			return max(int64(float64(free)*fraction)-weightBytes-planOverhead, 256<<20)
		}
	}
	return 4 << 30
}

// LoadText loads tokenizer.json, tokenizer_config.json and the chat
// template when present; a directory without them can still score and
// generate from token ids. For a GGUF model (a .gguf file, or a directory
// holding one and no config.json) they come from the file's metadata.
func LoadText(dir, templateFile string) (*Text, error) {
	if path, ok := ggufPath(dir); ok {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		t, err := ggufText(f, templateFile)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
		}
		return t, nil
	}
	e := &Text{}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err == nil {
		tok, err := tokenizer.Load(filepath.Join(dir, "tokenizer.json"))
		if err != nil {
			return nil, err
		}
		e.Tokenizer = tok
	}
	if _, err := os.Stat(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		tc, err := tokenizer.LoadConfig(dir)
		if err != nil {
			return nil, err
		}
		e.TokConfig = tc
	}
	src := ""
	if b, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja")); err == nil {
		src = string(b)
	} else if e.TokConfig != nil {
		src = e.TokConfig.ChatTemplate
	}
	if err := e.compileTemplate(src, templateFile); err != nil {
		return nil, err
	}
	return e, nil
}

// compileTemplate compiles the --chat-template file when one is given, else
// the model's own template src ("" for none).
func (e *Text) compileTemplate(src, templateFile string) error {
	if templateFile != "" {
		b, err := os.ReadFile(templateFile)
		if err != nil {
			return fmt.Errorf("--chat-template: %w", err)
		}
		src = string(b)
	}
	if src == "" {
		return nil
	}
	t, err := chat.Compile("chat_template", src)
	if err != nil {
		return fmt.Errorf("chat template: %w", err)
	}
	e.Template, e.TemplateSource = t, src
	return nil
}

// StopTokens are the ids that end a generation: generation_config's and
// config's eos ids.
func (e *Engine) StopTokens() []int32 {
	seen := map[int]bool{}
	var out []int32
	for _, l := range [][]int{e.Gen.EOSTokenID, e.Config.EOSTokenID} {
		for _, id := range l {
			if !seen[id] {
				seen[id] = true
				out = append(out, int32(id))
			}
		}
	}
	return out
}

// Close stops the scheduler and unmaps the weights.
func (e *Engine) Close() error {
	if e.Sched != nil {
		e.Sched.Shutdown()
	}
	if c, ok := e.Backend.(io.Closer); ok {
		c.Close()
	}
	if err := e.closeStore(); err != nil {
		return err
	}
	if e.ck != nil {
		return e.ck.close()
	}
	return nil
}

// DefaultThreads is the CPU thread count used when none is given.
func DefaultThreads() int { return runtime.GOMAXPROCS(0) }

// BOS is the tokenizer config's bos_token ("" when none).
func (t *Text) BOS() string {
	if t.TokConfig == nil {
		return ""
	}
	return t.TokConfig.BOSToken
}

// EOS is the tokenizer config's eos_token ("" when none).
func (t *Text) EOS() string {
	if t.TokConfig == nil {
		return ""
	}
	return t.TokConfig.EOSToken
}
