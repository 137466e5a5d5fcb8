package sample

import (
	"math"
	"slices"
)

// The scan path samples over the whole vocabulary, in place: logits become
// unnormalised probabilities w = exp((l-max)/T) in [0, 1], the most likely
// token's being exactly 1. Ranking is by w, then by lower id.

// pShift maps a weight to its top-p histogram bin: the float32 exponent and
// top 4 mantissa bits, so a bin spans a factor of at most 2^(1/16) and bins
// are ordered like the weights. Weights are at most 1, whose bin is 2032.
const (
	pShift = 19
	pBins  = 1 << 11
)

// kShift maps a logit's order key to its top-k radix bin (top 11 bits).
const (
	kShift = 21
	kBins  = 1 << (32 - kShift)
)

// Histograms are kept as 4 interleaved tables, summed at the end: adjacent
// tokens often land in the same bin, and one table would serialise those
// read-modify-writes through memory.

// scanPlan says which tokens survive and how much weight they carry. Every
// filter keeps a prefix of the ranking (weight descending, then id
// ascending), so the survivors are those ranking no lower than the last
// one: weight above lo, or equal to lo with id at most iLim. z is their
// total weight, summed in some order (draws tolerate the rounding); top is
// the most likely token.
type scanPlan struct {
	lo   float32
	iLim int
	z    float64
	top  int32
}

// keeps reports whether the token with id i and weight e survives.
func (pl *scanPlan) keeps(e float32, i int) bool {
	return e > pl.lo || (e == pl.lo && i <= pl.iLim)
}

// prepareScan turns logits into weights and plans the draw. If the answer
// needs no draw (no logit above -Inf, or some +Inf) it returns it with
// done set.
func (s *Sampler) prepareScan(logits []float32) (pl scanPlan, tok int32, done bool) {
	m, top := maxIndex(logits)
	if math.IsInf(float64(m), 0) {
		return pl, int32(top), true
	}
	pl.top = int32(top)
	floor := negInf
	if s.topK > 0 {
		// As HF and vLLM do, logits below the k-th largest are dropped, so
		// ties with the k-th survive and top-p renormalises over the rest.
		floor = s.kthLargest(logits)
	}
	wmin := s.minP // relative to the top weight, which is 1
	var z, zmin float64
	if s.shared != nil {
		z, zmin = s.shared.expWeights(logits, m, s.invT, floor, wmin)
	} else {
		z, zmin = expWeights(logits, m, s.invT, floor, wmin)
	}
	pl.lo, pl.iLim, pl.z = 0, -1, z // every positive weight
	if wmin > 0 {
		pl.lo, pl.iLim, pl.z = wmin, math.MaxInt, zmin
	}
	if s.topP < 1 {
		wc, ic, cum, ok := s.topPCutoff(logits, s.topP*z)
		// Both filters keep a prefix of the ranking; keep the shorter.
		if ok && wc >= wmin {
			pl.lo, pl.iLim, pl.z = wc, int(ic), cum
		}
	}
	return pl, 0, false
}

// topPCutoff finds the last token of the shortest ranking prefix whose
// weight reaches target, and the prefix's weight. Whole histogram bins are
// skipped by their mass; only the bin where the target falls is sorted.
// ok is false if rounding kept the total from reaching target (keep all).
func (s *Sampler) topPCutoff(w []float32, target float64) (wc float32, ic int32, cum float64, ok bool) {
	t := s.pHist
	hist := t[:pBins:pBins]
	if s.shared != nil && s.shared.hists != nil {
		s.shared.histogram(w, hist)
	} else {
		clear(t)
		h0, h1, h2, h3 := hist, t[pBins:2*pBins:2*pBins], t[2*pBins:3*pBins:3*pBins], t[3*pBins:4*pBins:4*pBins]
		i := 0
		for ; i+4 <= len(w); i += 4 {
			b := w[i : i+4 : i+4]
			h0[weightBin(b[0])] += float64(b[0])
			h1[weightBin(b[1])] += float64(b[1])
			h2[weightBin(b[2])] += float64(b[2])
			h3[weightBin(b[3])] += float64(b[3])
		}
		for ; i < len(w); i++ {
			h0[weightBin(w[i])] += float64(w[i])
		}
		for b := range hist {
			hist[b] += h1[b] + h2[b] + h3[b]
		}
	}
	// Bin 0 holds zeros and subnormals: never worth a cutoff.
	for b := len(hist) - 1; b > 0; b-- {
		if hist[b] == 0 || cum+hist[b] < target { // empty bins matter when target <= 0
			cum += hist[b]
			continue
		}
		bound := s.bound[:0]
		for i, e := range w {
			if bits := math.Float32bits(e); bits>>pShift == uint32(b) {
				// Ascending keys rank by weight descending, then id ascending.
				bound = append(bound, uint64(^bits)<<32|uint64(i))
			}
		}
		slices.Sort(bound)
		s.bound = bound
		for _, key := range bound {
			wc, ic = math.Float32frombits(^uint32(key>>32)), int32(uint32(key))
			if cum += float64(wc); cum >= target {
				break
			}
		}
		return wc, ic, cum, true // when not broken out: rounding, keep the bin
	}
	return 0, 0, cum, false
}

func weightBin(e float32) uint32 { return (math.Float32bits(e) >> pShift) & (pBins - 1) }

// kthLargest returns the k-th largest logit, counting repeats, by a radix
// select on an order-preserving key: count by the top 11 bits, gather the
// bin holding the k-th, narrow it by the next 10 bits if it is large, and
// sort what is left. NaN logits are replaced by -Inf.
func (s *Sampler) kthLargest(logits []float32) float32 {
	t := s.kHist
	clear(t)
	h0, h1, h2, h3 := t[:kBins:kBins], t[kBins:2*kBins:2*kBins], t[2*kBins:3*kBins:3*kBins], t[3*kBins:4*kBins:4*kBins]
	i := 0
	for ; i+4 <= len(logits); i += 4 {
		b := logits[i : i+4 : i+4]
		if b[0] != b[0] || b[1] != b[1] || b[2] != b[2] || b[3] != b[3] {
			for j, l := range b {
				if l != l {
					b[j] = negInf // NaN's key would rank above +Inf
				}
			}
		}
		h0[orderKey(b[0])>>kShift]++
		h1[orderKey(b[1])>>kShift]++
		h2[orderKey(b[2])>>kShift]++
		h3[orderKey(b[3])>>kShift]++
	}
	for ; i < len(logits); i++ {
		if logits[i] != logits[i] {
			logits[i] = negInf
		}
		h0[orderKey(logits[i])>>kShift]++
	}
	cnt := h0
	for b := range cnt {
		cnt[b] += h1[b] + h2[b] + h3[b]
	}
	b, r := binOfRank(cnt, s.topK)
	keys := s.keys[:0]
	for _, l := range logits {
		if key := orderKey(l); key>>kShift == b {
			keys = append(keys, key)
		}
	}
	if len(keys) > 1024 {
		// The next 10 bits below the first level's 11 (bits 11…20), then
		// a sort of what remains.
		cnt = cnt[:1<<10]
		clear(cnt)
		for _, key := range keys {
			cnt[(key>>(kShift-10))&(1<<10-1)]++
		}
		var b2 uint32
		b2, r = binOfRank(cnt, r)
		j := 0
		for _, key := range keys {
			if (key>>(kShift-10))&(1<<10-1) == b2 {
				keys[j] = key
				j++
			}
		}
		keys = keys[:j]
	}
	slices.Sort(keys)
	s.keys = keys
	return fromOrderKey(keys[len(keys)-r])
}

// binOfRank returns the bin, counting from the top, that holds the k-th
// item (k >= 1, at most the total), and the item's rank within it.
func binOfRank(cnt []int32, k int) (bin uint32, rank int) {
	cum := 0
	for b := len(cnt) - 1; b > 0; b-- {
		if c := int(cnt[b]); cum+c < k {
			cum += c
		} else {
			return uint32(b), k - cum
		}
	}
	return 0, k - cum
}

// orderKey maps a float32 to a uint32 with the same order (for non-NaN).
func orderKey(f float32) uint32 {
	b := math.Float32bits(f)
	// Negative: flip all bits; positive: flip the sign. Branch-free, as
	// signs of logits are unpredictable.
	return b ^ (uint32(int32(b)>>31) | 1<<31)
}

func fromOrderKey(k uint32) float32 {
	if k>>31 != 0 {
		return math.Float32frombits(k &^ (1 << 31))
	}
	return math.Float32frombits(^k)
}

// drawScan returns the first surviving token, in id order, at which the
// running weight exceeds u*pl.z. chunkSums, when given, are the weights'
// sums per expChunk tokens (the shared exp pass): where every weight counts
// they let the scan skip whole chunks.
func drawScan(w []float32, pl scanPlan, u float64, chunkSums []float64) int32 {
	target, cum, i := u*pl.z, 0.0, 0
	if pl.lo == 0 && pl.iLim < 0 && len(chunkSums) > 0 {
		c := 0
		for ; c < len(chunkSums)-1 && target >= cum+chunkSums[c]; c++ {
			cum += chunkSums[c]
		}
		i = c * expChunk // the last chunk when rounding put target at the total
	}
	if pl.lo == 0 && pl.iLim < 0 {
		// Every weight counts (zeros add nothing): skip whole blocks of 8,
		// each summed as a tree, rather than chaining one add per token.
		for ; i+8 <= len(w); i += 8 {
			b := w[i : i+8 : i+8]
			s := ((float64(b[0]) + float64(b[1])) + (float64(b[2]) + float64(b[3]))) +
				((float64(b[4]) + float64(b[5])) + (float64(b[6]) + float64(b[7])))
			if target < cum+s {
				break
			}
			cum += s
		}
	}
	last := pl.top
	for ; i < len(w); i++ {
		if e := w[i]; pl.keeps(e, i) {
			cum += float64(e)
			last = int32(i)
			if target < cum {
				return last
			}
		}
	}
	return last // u*z rounded up to the total
}
