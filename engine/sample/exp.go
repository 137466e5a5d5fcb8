package sample

import "math"

// Exponentials of max-subtracted logits dominate the cost of full-vocabulary
// sampling (152K per token), and math.Exp is general-purpose: it handles the
// whole float64 range and rounds to 1 ulp of float64, far more than a float32
// probability needs. The kernels below are range reduction to r in
// [-ln2/2, ln2/2] and a Taylor polynomial, inlined into the loop so the
// compiler keeps everything in registers.

const (
	log2e = 1.4426950408889634
	// ln2Hi+ln2Lo is ln 2 split so that n*ln2Hi is exact in float32 for the
	// |n| <= 126 used here (ln2Hi has 9 significant bits).
	ln2Hi = 0.693359375
	ln2Lo = -2.12194440e-4
	ln2   = 0.6931471805599453
	// minExpArg is the smallest argument whose exponential is a normal
	// float32; below it weights are taken as 0. The mass lost is at most
	// vocab*1.2e-38 relative to the top token: nothing.
	minExpArg = -87.3
)

// expWeights replaces every logit l in w by exp((l-m)*invT), or by 0 where
// l < floor, and returns the sum of the results in float64. m must be
// finite and at least every logit (so arguments are <= 0); -Inf and NaN
// logits become 0. If wmin > 0 it also returns the sum of the weights that
// are >= wmin. The relative error of each weight is below 3e-7.
func expWeights(w []float32, m, invT, floor, wmin float32) (sum, sumMin float64) {
	for i, l := range w {
		x := (l - m) * invT
		var e float32
		if x >= minExpArg && l >= floor { // false for NaN and -Inf
			n := int32(x*log2e - 0.5) // rounds to nearest for x <= 0
			nf := float32(n)
			r := x - nf*ln2Hi - nf*ln2Lo
			r2 := r * r
			// Estrin-style grouping shortens the dependency chain.
			p := (1 + r) + r2*(0.5+r*(1.0/6)) + (r2*r2)*((1.0/24+r*(1.0/120))+r2*(1.0/720))
			e = p * math.Float32frombits(uint32(n+127)<<23)
		}
		w[i] = e
		sum += float64(e)
	}
	if wmin > 0 {
		for _, e := range w {
			if e >= wmin {
				sumMin += float64(e)
			}
		}
	}
	return sum, sumMin
}

// sumExp64 returns the sum over logits of exp(l-m) in float64, with a
// relative error per term below 1e-9. m must be finite and at least every
// logit; NaN and -Inf logits, and terms below e^-700, contribute 0.
func sumExp64(logits []float32, m float32) float64 {
	var s0, s1 float64 // two accumulators halve the add dependency chain
	md := float64(m)
	for i := 0; i < len(logits); i++ {
		x := float64(logits[i]) - md
		var e float64
		if x >= -700 { // e^-700 is 1e-304: below that a term is nothing; false for NaN
			n := int64(x*log2e - 0.5)
			r := x - float64(n)*ln2
			r2 := r * r
			r4 := r2 * r2
			p := (1 + r) + r2*(0.5+r*(1.0/6)) + r4*((1.0/24+r*(1.0/120))+r2*(1.0/720+r*(1.0/5040))) + r4*r4*(1.0/40320)
			e = p * math.Float64frombits(uint64(n+1023)<<52)
		}
		if i&1 == 0 {
			s0 += e
		} else {
			s1 += e
		}
	}
	return s0 + s1
}
