package cuda

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

// TestMoEFusedEmulated runs kernels/moe.cu's moe_gateup and moe_down under
// the CPU emulation (testdata/emu/moe_fused_main.cpp) against a float64
// reference: the experts chosen (exactly, ties to the lower index) and
// their weights, every act row, the shared expert's gate logit, the output
// and the residual sum; every output must be written, and the routing must
// equal moe_route's on the same logits bit for bit. The cases cover rows
// that do not fill a block, H that is not a multiple of 256, a shared
// expert wider than the routed ones (with and without its gate), tied
// logits, several tokens, top-k with and without renormalisation, and more
// experts than a block has threads.
func TestMoEFusedEmulated(t *testing.T) {
	t.Parallel()
	needEmuLayout(t)
	bin := emuBinary(t, "moe-fused", "testdata/emu/moe_fused_main.cpp", "../../../kernels/moe.cu", "../../../kernels/gemv.cu")
	r := newRand(t)
	for _, c := range []moeEmuCase{
		{T: 1, E: 16, K: 4, H: 72, inter: 24, norm: true, resid: true},
		{T: 2, E: 24, K: 8, H: 264, inter: 16, sinter: 40, gated: true, resid: true, ties: true},
		{T: 3, E: 9, K: 2, H: 16, inter: 8, sinter: 8, norm: true},
		{T: 1, E: 128, K: 8, H: 48, inter: 16, sinter: 16, gated: true, norm: true, resid: true, ties: true},
		{T: 2, E: 40, K: 1, H: 520, inter: 32},
		{T: 1, E: 300, K: 6, H: 24, inter: 8, sinter: 16, gated: true, norm: true, resid: true, ties: true}, // more experts than threads: ranks over several rounds
		// Grouped by expert (moe_plan, moe_gateup_g, moe_down_g,
		// moe_combine_g), looped grids smaller and larger than the items:
		{T: 6, E: 4, K: 2, H: 72, inter: 24, norm: true, resid: true, grid: 3}, // groups past MOE_GTB: several passes
		{T: 16, E: 24, K: 8, H: 264, inter: 16, sinter: 40, gated: true, resid: true, ties: true, grid: 7},
		{T: 9, E: 9, K: 2, H: 16, inter: 8, sinter: 8, norm: true, grid: 50}, // more warps than tokens routing
		{T: 16, E: 300, K: 6, H: 24, inter: 8, sinter: 16, gated: true, norm: true, resid: true, ties: true, grid: 5},
		{T: 32, E: 8, K: 8, H: 40, inter: 16, grid: 4}, // every token every expert: T·K = MOE_PLAN_MAXQ
		{T: 2, E: 40, K: 1, H: 520, inter: 32, grid: 2},
	} {
		t.Run(fmt.Sprintf("T%d_E%d_K%d_H%d_I%d_S%d_g%v_n%v_r%v_G%d", c.T, c.E, c.K, c.H, c.inter, c.sinter, c.gated, c.norm, c.resid, c.grid), func(t *testing.T) {
			moeEmuCheck(t, bin, r, c)
		})
	}
}

type moeEmuCase struct {
	T, E, K, H, inter, sinter int
	gated, norm, resid, ties  bool
	grid                      int // the grouped kernels' looped grid (0: the token-by-token kernels)
}

func moeEmuCheck(t *testing.T, bin string, r *rand.Rand, c moeEmuCase) {
	T, E, K, H, I, SI := c.T, c.E, c.K, c.H, c.inter, c.sinter
	S := 0
	if SI > 0 {
		S = 1
	}
	ldA := max(I, SI)
	logits := make([]float32, T*E)
	for i := range logits {
		logits[i] = float32(r.NormFloat64() * 2)
	}
	if c.ties {
		// The top logit repeated at a higher index (and, past 32 experts,
		// at one a warp's lane also holds: a tie within a lane's share),
		// and two equal ones elsewhere: the ranks must break ties by index.
		for tok := 0; tok < T; tok++ {
			l := logits[tok*E : (tok+1)*E]
			best := 0
			for j := range l {
				if l[j] > l[best] {
					best = j
				}
			}
			l[(best+3)%E] = l[best]
			if E > 32 {
				l[(best+32)%E] = l[best]
			}
			l[(best+5)%E] = l[(best+7)%E]
		}
	}
	x := randF32(r, T*H, 1)
	bf := func(n int, scale float64) ([]uint16, []float64) {
		b, f := make([]uint16, n), make([]float64, n)
		for i := range b {
			b[i] = uint16(math.Float32bits(float32(r.NormFloat64()*scale)) >> 16)
			f[i] = float64(math.Float32frombits(uint32(b[i]) << 16))
		}
		return b, f
	}
	gb, gf := bf(E*I*H, 0.3)
	ub, uf := bf(E*I*H, 0.3)
	db, df := bf(E*H*I, 0.3)
	var sgb, sub, sdb []uint16
	var sgf, suf, sdf []float64
	if S == 1 {
		sgb, sgf = bf(SI*H, 0.3)
		sub, suf = bf(SI*H, 0.3)
		sdb, sdf = bf(H*SI, 0.3)
	}
	var sgw []float32
	if c.gated {
		sgw = randF32(r, H, 0.2)
	}
	aux := randF32(r, T*H, 1)
	b2i := func(v bool) int32 {
		if v {
			return 1
		}
		return 0
	}
	var in bytes.Buffer
	binary.Write(&in, binary.LittleEndian, []int32{int32(T), int32(E), int32(K), int32(H), int32(I), int32(SI), b2i(c.norm), b2i(c.gated), b2i(c.resid), b2i(c.grid > 0), int32(c.grid)})
	for _, v := range []any{logits, x, gb, ub, db, sgb, sub, sdb, sgw, aux} {
		binary.Write(&in, binary.LittleEndian, v)
	}
	stdout, err := runEmu(bin, in.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	topIdx, rIdx := make([]int32, T*K), make([]int32, T*K)
	topW, act, z, outv, sum, rW := make([]float32, T*K), make([]float32, T*(K+S)*ldA), make([]float32, T), make([]float32, T*H), make([]float32, T*H), make([]float32, T*K)
	for _, v := range []any{topIdx, topW, act, z, outv, sum, rIdx, rW} {
		if err := binary.Read(stdout, binary.LittleEndian, v); err != nil {
			t.Fatal(err)
		}
	}
	for i := range topIdx {
		if topIdx[i] != rIdx[i] || math.Float32bits(topW[i]) != math.Float32bits(rW[i]) {
			t.Fatalf("choice %d: moe_gateup (%d, %v), moe_route (%d, %v)", i, topIdx[i], topW[i], rIdx[i], rW[i])
		}
	}
	near := func(what string, got float32, want, scale float64) {
		t.Helper()
		if d := math.Abs(float64(got) - want); !(d <= 2e-5*scale) {
			t.Fatalf("%s = %v, want %v (scale %.3g)", what, got, want, scale)
		}
	}
	silu := func(v float64) float64 { return v / (1 + math.Exp(-v)) }
	for tok := 0; tok < T; tok++ {
		l := logits[tok*E : (tok+1)*E]
		order := make([]int, E)
		for j := range order {
			order[j] = j
		}
		sort.SliceStable(order, func(a, b int) bool { return l[order[a]] > l[order[b]] })
		m := float64(l[order[0]])
		var s float64
		for _, v := range l {
			s += math.Exp(float64(v) - m)
		}
		w := make([]float64, K)
		var top float64
		for k := 0; k < K; k++ {
			w[k] = math.Exp(float64(l[order[k]])-m) / s
			top += w[k]
		}
		if c.norm {
			for k := range w {
				w[k] /= top
			}
		}
		xr := x[tok*H : (tok+1)*H]
		dot := func(wf []float64, xs []float64) (v, scale float64) {
			for i := range xs {
				v += wf[i] * xs[i]
				scale += math.Abs(wf[i] * xs[i])
			}
			return v, scale
		}
		x64 := make([]float64, H)
		for i, v := range xr {
			x64[i] = float64(v)
		}
		// act rows and the down product, routed experts then the shared one.
		y, yScale := make([]float64, H), make([]float64, H)
		expert := func(k int, gw, uw, dw []float64, n int, wk float64, gscale float64) {
			a := make([]float64, n)
			row := act[(tok*(K+S)+k)*ldA:]
			for o := 0; o < n; o++ {
				g, gs := dot(gw[o*H:(o+1)*H], x64)
				u, us := dot(uw[o*H:(o+1)*H], x64)
				a[o] = wk * silu(g) * u
				near(fmt.Sprintf("act[%d][%d][%d]", tok, k, o), row[o], a[o], math.Abs(wk)*(1+gs)*(1+us))
				a[o] = float64(row[o]) // the kernel's own act feeds the down check
			}
			for o := 0; o < H; o++ {
				v, sc := dot(dw[o*n:(o+1)*n], a)
				y[o] += gscale * v
				yScale[o] += math.Abs(gscale) * sc
			}
		}
		for k := 0; k < K; k++ {
			e := order[k]
			if int(topIdx[tok*K+k]) != e {
				t.Fatalf("token %d choice %d: expert %d, want %d", tok, k, topIdx[tok*K+k], e)
			}
			near(fmt.Sprintf("topW[%d][%d]", tok, k), topW[tok*K+k], w[k], 1)
			expert(k, gf[e*I*H:], uf[e*I*H:], df[e*H*I:], I, w[k], 1)
		}
		if S == 1 {
			g := 1.0
			if c.gated {
				var zz, zs float64
				for i := range xr {
					zz += float64(xr[i]) * float64(sgw[i])
					zs += math.Abs(float64(xr[i]) * float64(sgw[i]))
				}
				near(fmt.Sprintf("z[%d]", tok), z[tok], zz, 1+zs)
				g = 1 / (1 + math.Exp(-float64(z[tok])))
			} else if !math.IsNaN(float64(z[tok])) {
				t.Fatalf("z[%d] written without a gate weight", tok)
			}
			expert(K, sgf, suf, sdf, SI, 1, g)
		}
		for o := 0; o < H; o++ {
			ix := tok*H + o
			near(fmt.Sprintf("out[%d][%d]", tok, o), outv[ix], y[o], 1+yScale[o])
			if c.resid {
				if want := aux[ix] + outv[ix]; sum[ix] != want {
					t.Fatalf("sum[%d] = %v, want aux + out = %v", ix, sum[ix], want)
				}
			} else if !math.IsNaN(float64(sum[ix])) {
				t.Fatalf("sum[%d] written without resid", ix)
			}
		}
		// act's padding columns (ldA past a narrower expert) stay unwritten.
		for k := 0; k < K+S; k++ {
			n := I
			if k == K {
				n = SI
			}
			for o := n; o < ldA; o++ {
				if v := act[(tok*(K+S)+k)*ldA+o]; !math.IsNaN(float64(v)) {
					t.Fatalf("act[%d][%d][%d] (past the expert's %d rows) written: %v", tok, k, o, n, v)
				}
			}
		}
	}
}

func randF32(r *rand.Rand, n int, scale float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * scale)
	}
	return v
}
