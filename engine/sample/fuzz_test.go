package sample

import (
	"math"
	"math/rand/v2"
	"testing"
)

// FuzzSample checks that every path plans the reference distribution and
// draws inside it, for arbitrary logits (with -Inf, +Inf and NaN) and
// parameters. Logits are multiples of 1/4 so that distinct logits have
// distinct float32 weights at any temperature used here: the scan path
// ranks by weight, the reference by logit.
func FuzzSample(f *testing.F) {
	f.Add([]byte{10, 20, 30, 20, 10, 0x80, 5}, uint8(64), int16(3), uint16(800), uint16(0), uint8(0), uint64(1))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, uint8(32), int16(0), uint16(500), uint16(100), uint8(3), uint64(2))
	f.Add([]byte{0x7e, 1, 0x7e, 0x7f}, uint8(100), int16(-1), uint16(999), uint16(0), uint8(1), uint64(3))
	f.Add(make([]byte, 300), uint8(64), int16(290), uint16(300), uint16(0), uint8(0), uint64(4))
	f.Fuzz(func(t *testing.T, data []byte, temp uint8, topK int16, topP, minP uint16, pen uint8, seed uint64) {
		if len(data) == 0 || len(data) > 700 {
			return
		}
		logits := make([]float32, len(data))
		for i, b := range data {
			switch b {
			case 0x80:
				logits[i] = negInf
			case 0x7f:
				logits[i] = float32(math.NaN())
			case 0x7e:
				logits[i] = float32(math.Inf(1))
			default:
				logits[i] = float32(int8(b)) / 4
			}
		}
		v := len(logits)
		p := Params{
			Temperature:       float32(temp) / 64,
			TopK:              int(topK) % (v + 300),
			TopP:              float32(topP%1000+1) / 1000,
			MinP:              float32(minP%1001) / 1000,
			RepetitionPenalty: 1,
			Seed:              &seed,
		}
		if p.TopK < -1 {
			p.TopK = -p.TopK
		}
		r := rand.New(rand.NewPCG(seed, 0))
		var prompt, gen []int32
		if pen&1 != 0 {
			p.RepetitionPenalty = 0.5 + float32(pen)/128
			prompt = []int32{int32(r.IntN(v)), int32(r.IntN(v))}
		}
		if pen&2 != 0 {
			p.PresencePenalty, p.FrequencyPenalty = 0.75, 0.5 // multiples of 1/4: exact
			gen = []int32{int32(r.IntN(v)), int32(r.IntN(v)), int32(r.IntN(v))}
		}
		if pen&4 != 0 {
			p.LogitBias = map[int32]float32{int32(r.IntN(v)): 2.5}
		}
		if err := p.ValidateVocab(v); err != nil {
			t.Fatalf("fuzz setup made invalid params: %v", err)
		}
		s := New(p, v, prompt)
		for _, g := range gen {
			s.Accept(g)
		}
		want := refProbs(refAdjust(logits, p, prompt, gen), p)
		got := implProbs(s, logits)
		for i := range want {
			support := (want[i] == 0) != (got[i] == 0) && !(got[i] == 0 && want[i] < 1.2e-38)
			if math.Abs(want[i]-got[i]) > 2e-6 || support {
				t.Fatalf("token %d: prob %.9g, reference %.9g; params %+v logits %v", i, got[i], want[i], p, logits)
			}
		}
		buf := make([]float32, v)
		for range 5 {
			copy(buf, logits)
			tok := s.Sample(buf)
			if tok < 0 || int(tok) >= v || got[tok] == 0 {
				t.Fatalf("drew %d, planned probability %v", tok, got[max(0, min(int(tok), v-1))])
			}
		}
	})
}
