package model

import (
	"fmt"
	"math"

	"github.com/infernix/infernix/engine/backend"
)

// InvFreq returns the rotary inverse frequencies for rotary dimension dim and
// the attention scaling factor, following transformers' rope initialisers
// (default, linear, dynamic at its base length, yarn).
func InvFreq(c *Config, dim int) ([]float64, float64, error) {
	base := c.Theta()
	half := dim / 2
	inv := make([]float64, half)
	for i := range inv {
		inv[i] = 1 / math.Pow(base, float64(2*i)/float64(dim))
	}
	r := c.Rope()
	switch kind := r.Kind(); kind {
	case "default", "":
		return inv, 1, nil
	case "linear":
		for i := range inv {
			inv[i] /= r.Factor
		}
		return inv, 1, nil
	case "dynamic":
		// At or below the original length dynamic NTK equals the default.
		return inv, 1, nil
	case "yarn":
		return yarn(c, r, dim, base)
	default:
		return nil, 0, fmt.Errorf("config.json: rope scaling type %q is not supported (default, linear, dynamic, yarn)", kind)
	}
}

func yarn(c *Config, r *RopeScaling, dim int, base float64) ([]float64, float64, error) {
	factor := r.Factor
	origMax := r.OriginalMaxPositionEmbeddings
	if origMax == 0 {
		origMax = c.MaxPositionEmbeddings
	}
	if factor <= 0 {
		return nil, 0, fmt.Errorf("config.json: yarn rope scaling needs a positive factor")
	}
	getMScale := func(scale, m float64) float64 {
		if scale <= 1 {
			return 1
		}
		return 0.1*m*math.Log(scale) + 1
	}
	var attn float64
	switch {
	case r.AttentionFactor != nil:
		attn = *r.AttentionFactor
	case r.MScale != nil && r.MScaleAllDim != nil && *r.MScale != 0 && *r.MScaleAllDim != 0:
		attn = getMScale(factor, *r.MScale) / getMScale(factor, *r.MScaleAllDim)
	default:
		attn = getMScale(factor, 1)
	}
	betaFast, betaSlow := 32.0, 1.0
	if r.BetaFast != nil && *r.BetaFast != 0 {
		betaFast = *r.BetaFast
	}
	if r.BetaSlow != nil && *r.BetaSlow != 0 {
		betaSlow = *r.BetaSlow
	}
	corrDim := func(rot float64) float64 {
		return float64(dim) * math.Log(float64(origMax)/(rot*2*math.Pi)) / (2 * math.Log(base))
	}
	low, high := corrDim(betaFast), corrDim(betaSlow)
	if r.Truncate == nil || *r.Truncate {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low = math.Max(low, 0)
	high = math.Min(high, float64(dim-1))
	if low == high {
		high += 0.001
	}
	half := dim / 2
	inv := make([]float64, half)
	for i := range inv {
		posFreq := math.Pow(base, float64(2*i)/float64(dim))
		extra := 1 / posFreq
		inter := 1 / (factor * posFreq)
		ramp := math.Min(math.Max((float64(i)-low)/(high-low), 0), 1)
		extraFactor := 1 - ramp
		inv[i] = inter*(1-extraFactor) + extra*extraFactor
	}
	return inv, attn, nil
}

// NewRope builds cos/sin tables for positions [0, maxPos) and rotary
// dimension dim (2 × pairs), cos and sin pre-multiplied by the attention scaling.
func NewRope(c *Config, dim, maxPos int) (*backend.Rope, error) {
	inv, scale, err := InvFreq(c, dim)
	if err != nil {
		return nil, err
	}
	half := dim / 2
	r := &backend.Rope{Half: half, MaxPos: maxPos, Cos: make([]float32, maxPos*half), Sin: make([]float32, maxPos*half)}
	for p := 0; p < maxPos; p++ {
		for i, f := range inv {
			// transformers computes the angle in float32.
			a := float64(float32(p) * float32(f))
			r.Cos[p*half+i] = float32(math.Cos(a) * scale)
			r.Sin[p*half+i] = float32(math.Sin(a) * scale)
		}
	}
	return r, nil
}
