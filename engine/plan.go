package engine

import (
	"os"
	"path/filepath"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/gguf"
	"github.com/infernix/infernix/engine/model"
	"github.com/infernix/infernix/engine/safetensors"
)

// Plan is the device memory a model needs at a context length and lane count.
type Plan struct {
	WeightBytes     int64 // from the checkpoint's tensors, or counted from config.json
	KVBytes         int64 // bf16 KV for every lane's full context
	StateBytes      int64 // recurrent state of hybrid models (f32, per lane)
	ActivationBytes int64 // forward scratch at the largest batch, logits included
	OverheadBytes   int64 // CUDA context, cuBLASLt workspace, graphs
	Context, Lanes  int
}

// Total is everything the plan needs.
func (p *Plan) Total() int64 {
	return p.WeightBytes + p.KVBytes + p.StateBytes + p.ActivationBytes + p.OverheadBytes
}

// planOverhead is what the CUDA backend takes besides tensors (measured on
// the H200: context ~500 MiB, workspace and graph pools).
const planOverhead = 1 << 30

// MakePlan sizes a model directory (config.json, and the safetensors
// headers when present) or a GGUF file (its metadata; quantized tensors
// count expanded to f16, as they load) for ctx tokens × lanes on a GPU
// backend.
func MakePlan(dir string, ctx, lanes, batchTokens int) (*Plan, error) {
	var cfg *model.Config
	var ggufBytes int64
	if path, ok := ggufPath(dir); ok {
		f, err := gguf.Open(path)
		if err != nil {
			return nil, err
		}
		raw, err := model.GGUFConfig(f)
		ggufBytes = model.GGUFLoadedBytes(f)
		f.Close()
		if err != nil {
			return nil, err
		}
		if cfg, err = model.ParseConfig(raw); err != nil {
			return nil, err
		}
	} else {
		var err error
		if cfg, err = model.LoadConfig(dir); err != nil {
			return nil, err
		}
	}
	if _, err := model.Lookup(cfg.Arch()); err != nil {
		return nil, err
	}
	tc := cfg.Text()
	if ctx <= 0 {
		ctx = min(tc.MaxPositionEmbeddings, 32768)
	}
	ctx = min(ctx, tc.MaxPositionEmbeddings)
	lanes = max(lanes, 1)
	if batchTokens <= 0 {
		batchTokens = 512
	}
	p := &Plan{Context: ctx, Lanes: lanes, OverheadBytes: planOverhead}
	if ggufBytes > 0 {
		p.WeightBytes = ggufBytes
	} else if set, err := safetensors.OpenDir(dir); err == nil {
		p.WeightBytes = set.Bytes()
		set.Close()
	} else if !os.IsNotExist(err) && hasSafetensors(dir) {
		return nil, err
	} else {
		p.WeightBytes = 2 * countParams(tc)
	}
	attnLayers := tc.NumHiddenLayers
	if len(tc.LayerTypes) > 0 {
		attnLayers = 0
		for _, t := range tc.LayerTypes {
			if t == "full_attention" {
				attnLayers++
			}
		}
		linear := int64(tc.NumHiddenLayers - attnLayers)
		perLane := linear * 4 * (int64(tc.LinearNumValueHeads*tc.LinearValueHeadDim*tc.LinearKeyHeadDim) +
			int64(tc.LinearConvKernelDim)*int64(2*tc.LinearNumKeyHeads*tc.LinearKeyHeadDim+tc.LinearNumValueHeads*tc.LinearValueHeadDim))
		p.StateBytes = perLane * int64(lanes)
	}
	blocks := int64(lanes) * int64((ctx+backend.BlockSize-1)/backend.BlockSize)
	p.KVBytes = blocks * backend.BlockSize * int64(attnLayers) * 2 * int64(tc.NumKeyValueHeads*tc.HeadDim) * 2
	inter := int64(max(tc.IntermediateSize, tc.MoeIntermediateSize*max(tc.NumExpertsPerTok, 1)))
	perToken := 4 * (6*int64(tc.HiddenSize) + 2*inter + 4*int64(tc.NumAttentionHeads*tc.HeadDim))
	p.ActivationBytes = int64(batchTokens)*perToken + 64*int64(tc.VocabSize)*4
	return p, nil
}

func hasSafetensors(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	return len(m) > 0
}

// countParams counts a Qwen3-family decoder's parameters from its config,
// for directories that hold only config.json.
func countParams(c *model.Config) int64 {
	H, hd := int64(c.HiddenSize), int64(c.HeadDim)
	attn := H*int64(c.NumAttentionHeads)*hd*2 + 2*H*int64(c.NumKeyValueHeads)*hd + 2*H + 2*hd
	var mlp int64
	if c.NumExperts > 0 {
		mlp = int64(c.NumExperts)*3*H*int64(c.MoeIntermediateSize) + H*int64(c.NumExperts)
		if c.SharedExpertSize > 0 {
			mlp += 3*H*int64(c.SharedExpertSize) + H
		}
	} else {
		mlp = 3 * H * int64(c.IntermediateSize)
	}
	n := int64(c.NumHiddenLayers)*(attn+mlp) + int64(c.VocabSize)*H + H
	if !c.TieWordEmbeddings {
		n += int64(c.VocabSize) * H
	}
	return n
}
