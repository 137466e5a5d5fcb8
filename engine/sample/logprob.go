package sample

import "math"

// LogSumExp returns log(sum(exp(logits))), the log-softmax normaliser:
// the log-probability of token i is logits[i] - LogSumExp(logits). It
// subtracts the maximum before exponentiating and sums in float64, so it
// neither overflows nor loses small terms. NaN logits count as -Inf. It
// returns -Inf when no logit exceeds -Inf and +Inf when one is +Inf.
func LogSumExp(logits []float32) float64 {
	m := maxLogit(logits)
	if math.IsInf(float64(m), 0) {
		return float64(m)
	}
	return float64(m) + math.Log(sumExp64(logits, m))
}

// LogProbOf returns the log-probability of token id under softmax(logits):
// the model's own distribution, before any sampling parameter, as the
// OpenAI API reports it. It costs a pass over logits; when several are
// needed, compute LogSumExp once and subtract. -Inf logits give -Inf
// (callers rendering JSON must clamp it, e.g. to -9999 as vLLM does).
func LogProbOf(logits []float32, id int32) float32 {
	return logProb(logits[id], LogSumExp(logits))
}

// TopLogProbs returns the n most likely tokens of softmax(logits) with
// their log-probabilities, most likely first and, among equals, lower id
// first. n is clamped to [0, len(logits)]. The result is dst[:n], so a
// caller that passes the previous result back allocates nothing; a dst
// with cap < n is replaced.
func TopLogProbs(logits []float32, n int, dst []TokenLogProb) []TokenLogProb {
	return topLogProbs(logits, n, LogSumExp(logits), dst)
}

func topLogProbs(logits []float32, n int, lse float64, dst []TokenLogProb) []TokenLogProb {
	dst, _ = topN(logits, n, dst, nil)
	for i := range dst {
		dst[i].LogProb = logProb(dst[i].LogProb, lse)
	}
	return dst
}

// logProb is l - lse, with the limits made explicit: when lse is infinite
// (all -Inf, or some +Inf) the token is certain if it is +Inf and
// impossible otherwise.
func logProb(l float32, lse float64) float32 {
	if l != l {
		return negInf
	}
	if math.IsInf(lse, 0) {
		if math.IsInf(float64(l), 1) {
			return 0
		}
		return negInf
	}
	return float32(float64(l) - lse)
}

// maxLogit returns the largest logit, skipping NaN; -Inf if there is none.
func maxLogit(logits []float32) float32 {
	m, _ := maxIndex(logits)
	return m
}
