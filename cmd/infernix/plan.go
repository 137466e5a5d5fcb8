package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/engine/backend/cuda"
)

func init() {
	register("plan", "device memory for weights, KV and activations, and whether it fits (exit 0 fits, 3 does not)", cmdPlan)
}

func cmdPlan(args []string, stdout io.Writer) error {
	fs := newFlags("plan")
	dir := fs.String("model", "", "model directory (config.json; safetensors headers when present)")
	ctx := fs.Int("context", 0, "context length per lane (0 = the model's, at most 32768)")
	lanes := fs.Int("lanes", 4, "sequences decoded together")
	batch := fs.Int("max-batch-tokens", 512, "largest forward pass in tokens")
	fraction := fs.Float64("gpu-memory-fraction", 0.9, "share of the device's free memory the server may use")
	gpuGiB := fs.Float64("gpu-memory", 0, "plan for a device with this many GiB free instead of the one present")
	asJSON := fs.Bool("json", false, "print JSON")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		return errors.New("--model DIR is required")
	}
	if *fraction <= 0 || *fraction > 1 {
		return fmt.Errorf("--gpu-memory-fraction must be in (0, 1], got %g", *fraction)
	}
	for _, c := range []struct {
		name     string
		v, least int
	}{{"context", *ctx, 0}, {"lanes", *lanes, 1}, {"max-batch-tokens", *batch, 1}} {
		if c.v < c.least {
			return fmt.Errorf("--%s %d: must be at least %d", c.name, c.v, c.least)
		}
	}
	if *gpuGiB < 0 {
		return fmt.Errorf("--gpu-memory %g: must not be negative (0 = the GPU present)", *gpuGiB)
	}
	if _, err := os.Stat(*dir); err != nil {
		return fmt.Errorf("model %s not found", *dir)
	}
	p, err := engine.MakePlan(*dir, *ctx, *lanes, *batch)
	if err != nil {
		return err
	}
	device := fmt.Sprintf("a device with %.1f GiB free (--gpu-memory)", *gpuGiB)
	free := int64(*gpuGiB * (1 << 30))
	if free <= 0 {
		be, err := cuda.New(cuda.Options{})
		if err != nil {
			return fmt.Errorf("no plan possible: no CUDA device (%v); give --gpu-memory GiB to plan for one", oneLine(err.Error()))
		}
		f, _, _, merr := be.Memory()
		be.Close()
		if merr != nil {
			return fmt.Errorf("no plan possible: %v", merr)
		}
		free = int64(f)
		device = fmt.Sprintf("this GPU (%.1f GiB free)", float64(free)/(1<<30))
	}
	budget := int64(float64(free) * *fraction)
	fits := p.Total() <= budget
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(map[string]any{"weights_bytes": p.WeightBytes, "kv_bytes": p.KVBytes,
			"state_bytes": p.StateBytes, "activation_bytes": p.ActivationBytes, "overhead_bytes": p.OverheadBytes,
			"total_bytes": p.Total(), "budget_bytes": budget, "context": p.Context, "lanes": p.Lanes, "fits": fits}); err != nil {
			return err
		}
	} else {
		gib := func(n int64) string { return fmt.Sprintf("%8.2f GiB", float64(n)/(1<<30)) }
		fmt.Fprintf(stdout, "weights      %s\n", gib(p.WeightBytes))
		fmt.Fprintf(stdout, "KV cache     %s  (%d lanes × %d tokens, bf16)\n", gib(p.KVBytes), p.Lanes, p.Context)
		if p.StateBytes > 0 {
			fmt.Fprintf(stdout, "state        %s  (recurrent layers)\n", gib(p.StateBytes))
		}
		fmt.Fprintf(stdout, "activations  %s\n", gib(p.ActivationBytes))
		fmt.Fprintf(stdout, "overhead     %s\n", gib(p.OverheadBytes))
		fmt.Fprintf(stdout, "total        %s  of %s usable on %s at --gpu-memory-fraction %g\n", gib(p.Total()), gib(budget), device, *fraction)
	}
	if !fits {
		return &exitError{code: 3, msg: fmt.Sprintf("does not fit: needs %.2f GiB, %.2f GiB usable", float64(p.Total())/(1<<30), float64(budget)/(1<<30))}
	}
	return nil
}
