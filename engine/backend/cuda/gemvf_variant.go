package cuda

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// The fused decode products (gemvf, kernels/gemv.cu) compile with two
// tunables: GF_U, the 16-byte loads each lane keeps in flight per weight
// row (1…16, default 2; GF_UR sets it for the residual products o_proj and
// down alone), and GF_RW, the outputs per warp of the products
// other than SwiGLU (1 or 2, default 2; with 1 twice as many warps stream
// o_proj and down, whose 256 blocks of 2 outputs per warp leave an H200 at
// 24% occupancy, run 10). Neither changes a result: every lane adds its
// elements in the same order. INFERNIX_CUDA_GEMVF="GF_RW=1 GF_U=8" picks a
// variant at start-up; the bench measures a few side by side.

// benchGemvfVariants are the variants the bench measures beside the default
// (and TestKernelsCompile compiles).
// Run 13 measured GF_RW=1, GF_U=8, GF_RW=1 GF_U=8, GF_RW=1 GF_UR=16,
// GF_UR=8 and GF_PIPE=1 (at 1, 2 and 4 loads) no faster than GF_U=4 (then
// the default), GF_U=1 and 3 a little faster, and GF_U=2 the fastest:
// 205 and 214 tok/s against 195, so 2 became the default. The bench keeps
// measuring the old default and the nearest others.
// GF_KS (warps that share an output group; run 13, commit e6cca6f) at 2,
// 4 and 8, and for the residual products alone (GF_KSR=4): 2 within noise
// of the default (216.6 against 212.9 at 512, 158.5 against 163.0 at 32K),
// the others slower (202–206 against 204–206).
// Run 14 measured GF_U=4 slower again (202–205 against 214–222) and GF_KS=2
// 0.6–1.8% above the default measured before it, within the drift of one
// process. Run 15 measured GF_L2PF (the weights' L2 prefetch before
// PDL_WAIT) 20% slower (172 against 215 tok/s at 512, 140 against 167 at
// 32K), alone and with the products triggering after their main loop.
// GF_TMA (the weights copied into shared memory in bulk, run 15 call b)
// was 15–28% slower: 183, 181, 165 and 157 tok/s at 512 for 4 stages of
// 512 elements, 2 of 512, 3 of 1,024 and 8 of 256, against 217–220.
// Run 17 call b measured GF_KS=2 in processes of their own: +1.5% alone,
// +3.8% with the looped products (INFERNIX_CUDA_GEMV_WAVE) at 512, the
// same at 32K; GF_KS=2 became the default, and the bench measures 1.
// Run 17 call d: GF_MINB=6 (the one-row kernels held to 40 registers)
// +6.0% at 512 and +4.4% at 32K over the mean of three default processes; GF_KSS=2 (two warps per gate|up output)
// no faster, with it or without. The bench measures the one-row kernels
// unbounded (GF_MINB=1) and GF_KS=1.
// Run 22 call a, a process each: GF_DYN (looped products take their
// shares from a counter) 223.5 tok/s at 512, GF_TRIGGER (one-wave
// products let the next launch after their loop) 223.7, both 225.3 and
// 224.2, against 229.0, 226.4 and 230.1 without: 1.5–2% slower; removed
// (1c19422 has them), as was GF_XPF (7b2a5c3; −1.5% in run 21).
var benchGemvfVariants = []string{"GF_MINB=1", "GF_KS=1"}

// gemvfDefaultKS and gemvfDefaultMinB are GF_KS's and GF_MINB's defaults
// in kernels/gemv.cu.
const (
	gemvfDefaultKS   = 2
	gemvfDefaultMinB = 6
)

// gemvfVariant is a parsed INFERNIX_CUDA_GEMVF.
type gemvfVariant struct {
	defs []string // -D defines for gemv.cu, in a fixed order (the kernel cache key)
	rw   int      // outputs per warp of the non-SwiGLU products
	ks   int      // warps per output group of the q|k|v-style products (GF_KS)
	ksr  int      // and of the residual ones (GF_KSR)
	kss  int      // and of gate|up (GF_KSS)
	smem int      // GF_TMA: the dynamic shared memory of a block (its weight stages), else 0
	// GF_TIMING=1: the plain kernels read GemvP.part (where each warp's
	// timeline goes, or 0), so every launch passes all of GemvP.
	timing bool
}

// rowsPerBlock is how many outputs a block of the fused kernel for epi
// computes.
func (v gemvfVariant) rowsPerBlock(epi int) int {
	switch epi {
	case epiSwiGLU:
		return gemvfWarps / v.kss // one output (two weight rows) per warp, or GF_KSS warps
	case epiResid:
		return gemvfWarps * v.rw / v.ksr
	}
	return gemvfWarps * v.rw / v.ks
}

// splitsK says whether epi's products split I between warps (GF_KS), which
// the split-K kernels (gemvfw_*) do not combine with.
func (v gemvfVariant) splitsK(epi int) bool {
	return epi == epiResid && v.ksr > 1 || epi == epiNone && v.ks > 1 || epi == epiSwiGLU && v.kss > 1
}

// gemvfShapes are the fused products' defines that the host's launches
// depend on: the outputs a block computes (GF_RW, GF_KS, GF_KSR, GF_KSS)
// and its shared memory (GF_TMA, GF_TS, GF_TC).
var gemvfShapes = map[string]bool{"GF_RW": true, "GF_KS": true, "GF_KSR": true, "GF_KSS": true, "GF_TMA": true, "GF_TS": true, "GF_TC": true}

// splitDefines splits INFERNIX_CUDA_DEFINES (spaces or commas between;
// commas for scripts that split a setting on spaces) into the defines for
// every module, those of gemvfShapes, which must reach the host as an
// INFERNIX_CUDA_GEMVF variant (compiled into gemv.cu alone, a product's
// grid would cover only part of its outputs: run 36's GF_KSS=2 left half
// of gate|up uncomputed and read 25% "faster"), and the malformed ones.
func splitDefines(s string) (global, shapes, bad []string) {
	for _, d := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		name, _, _ := strings.Cut(d, "=")
		switch {
		case !validMacro(name):
			bad = append(bad, d)
		case gemvfShapes[name]:
			shapes = append(shapes, d)
		default:
			global = append(global, d)
		}
	}
	return global, shapes, bad
}

// parseGemvfVariant reads "GF_RW=1 GF_U=8" (spaces or commas); the empty
// string is the default variant.
func parseGemvfVariant(s string) (gemvfVariant, error) {
	v := gemvfVariant{rw: 2, ks: gemvfDefaultKS, ksr: gemvfDefaultKS, kss: 1}
	bad := v
	u, ur, pipe, ks, ksr, trig, l2pf, tma, ts, tc, minb := 0, 0, 0, 0, 0, -1, 0, 0, 0, 0, gemvfDefaultMinB
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ' ' || r == ',' }) {
		name, val, ok := strings.Cut(f, "=")
		n, err := strconv.Atoi(val)
		if !ok || err != nil {
			return bad, fmt.Errorf("%q is not NAME=integer", f)
		}
		switch {
		case name == "GF_RW" && (n == 1 || n == 2):
			v.rw = n
		case name == "GF_U" && n >= 1 && n <= 16:
			u = n
		case name == "GF_UR" && n >= 1 && n <= 16:
			ur = n
		case name == "GF_PIPE" && (n == 0 || n == 1):
			pipe = n
		case name == "GF_KS" && (n == 1 || n == 2 || n == 4 || n == 8):
			ks = n
		case name == "GF_KSR" && (n == 1 || n == 2 || n == 4 || n == 8):
			ksr = n
		case name == "GF_KSS" && (n == 1 || n == 2 || n == 4 || n == 8):
			v.kss = n
		case name == "GF_MINB" && n >= 1 && n <= 8:
			minb = n
		case name == "PDL_TRIGGER" && n >= 0 && n <= 2:
			trig = n
		case name == "GF_L2PF" && (n == 0 || n == 1):
			l2pf = n
		case name == "GF_TMA" && (n == 0 || n == 1):
			tma = n
		case name == "GF_TS" && n >= 2 && n <= 8:
			ts = n
		case name == "GF_TC" && n >= 256 && n <= 4096 && n%256 == 0:
			tc = n
		case name == "GF_TIMING" && (n == 0 || n == 1):
			v.timing = n == 1
		default:
			return bad, fmt.Errorf("%q: GF_RW is 1 or 2, GF_U and GF_UR 1 to 16, GF_PIPE 0 or 1, GF_KS, GF_KSR and GF_KSS 1, 2, 4 or 8, GF_MINB 1 to 8, GF_L2PF 0 or 1, PDL_TRIGGER 0 to 2, GF_TMA 0 or 1, GF_TS 2 to 8, GF_TC a multiple of 256 up to 4096, GF_TIMING 0 or 1", f)
		}
	}
	if tma == 1 {
		// Stages of 16 weight rows (kernels/gemv.cu); defaults GF_TS=4, GF_TC=512.
		v.defs = append(v.defs, "GF_TMA=1")
		if ts == 0 {
			ts = 4
		} else if ts != 4 {
			v.defs = append(v.defs, fmt.Sprintf("GF_TS=%d", ts))
		}
		if tc == 0 {
			tc = 512
		} else if tc != 512 {
			v.defs = append(v.defs, fmt.Sprintf("GF_TC=%d", tc))
		}
		v.smem = ts * 16 * tc * 2
	} else if ts != 0 || tc != 0 {
		return bad, fmt.Errorf("GF_TS and GF_TC need GF_TMA=1")
	}
	if ks != 0 && ks != gemvfDefaultKS {
		v.defs = append(v.defs, fmt.Sprintf("GF_KS=%d", ks))
		v.ks = ks
	}
	v.ksr = v.ks // GF_KSR defaults to GF_KS
	if ksr != 0 && ksr != v.ks {
		v.defs = append(v.defs, fmt.Sprintf("GF_KSR=%d", ksr))
		v.ksr = ksr
	}
	if v.kss != 1 {
		v.defs = append(v.defs, fmt.Sprintf("GF_KSS=%d", v.kss))
	}
	if minb != gemvfDefaultMinB {
		v.defs = append(v.defs, fmt.Sprintf("GF_MINB=%d", minb))
	}
	if pipe != 0 {
		v.defs = append(v.defs, "GF_PIPE=1")
	}
	if v.rw != 2 {
		v.defs = append(v.defs, fmt.Sprintf("GF_RW=%d", v.rw))
	}
	if u != 0 && u != 2 {
		v.defs = append(v.defs, fmt.Sprintf("GF_U=%d", u))
	}
	eff := u // GF_UR defaults to GF_U, which defaults to 2
	if eff == 0 {
		eff = 2
	}
	if ur != 0 && ur != eff {
		v.defs = append(v.defs, fmt.Sprintf("GF_UR=%d", ur))
	}
	if l2pf != 0 {
		v.defs = append(v.defs, "GF_L2PF=1")
	}
	if v.timing {
		v.defs = append(v.defs, "GF_TIMING=1")
	}
	// Where the products let the next kernel launch under PDL
	// (kernels/prelude.cuh); it overrides INFERNIX_CUDA_PDL_TRIGGER for
	// gemv.cu.
	if trig >= 0 {
		v.defs = append(v.defs, fmt.Sprintf("PDL_TRIGGER=%d", trig))
	}
	return v, nil
}

// name is the variant as the bench records it ("default", "rw1_u8").
func (v gemvfVariant) name() string {
	if len(v.defs) == 0 {
		return "default"
	}
	s := strings.ToLower(strings.Join(v.defs, "_"))
	return strings.NewReplacer("gf_", "", "=", "").Replace(s)
}

// gemvfNames maps the fused kernels' names to their slots in k.
func gemvfNames(k *kernelSet, wide bool) map[string]**kernel {
	m := map[string]**kernel{}
	for mode := 0; mode < 3; mode++ {
		for nrm := 0; nrm < 2; nrm++ {
			for i, r := range []int{1, 2, 4, 8} {
				m[fmt.Sprintf("gemvf_m%d_n%d_r%d", mode, nrm, r)] = &k.gemvf[mode][nrm][i]
				if wide {
					m[fmt.Sprintf("gemvfw_m%d_n%d_r%d", mode, nrm, r)] = &k.gemvfw[mode][nrm][i]
				}
			}
		}
	}
	return m
}

// useGemvfVariant compiles gemv.cu with v's defines and points the fused
// kernels (not the split-K ones, which keep two outputs per warp) at it.
// Graphs captured before hold the old kernels; their record lists no
// longer match, so the next forwards are captured again. The caller holds
// the thread.
func (b *Backend) useGemvfVariant(v gemvfVariant) error {
	b.flush()
	if err := b.load("gemv.cu", v.defs, gemvfNames(&b.k, false)); err != nil {
		return err
	}
	if err := b.gemvfSmem(v); err != nil {
		return err
	}
	b.gemvf = v
	return nil
}

// gemvfSmem lets the fused kernels of variant v take its dynamic shared
// memory (GF_TMA's weight stages; more than the 48 KB allowed by default).
func (b *Backend) gemvfSmem(v gemvfVariant) error {
	if v.smem == 0 {
		return nil
	}
	if v.smem > b.maxSmem {
		return fmt.Errorf("cuda: INFERNIX_CUDA_GEMVF %v needs %d bytes of shared memory per block; the device allows %d", v.defs, v.smem, b.maxSmem)
	}
	for _, k := range b.k.gemvf {
		for _, kn := range k {
			for _, kr := range kn {
				if kr == nil {
					continue
				}
				if err := b.drv.FuncSetAttribute(kr.fn, driver.FuncAttrMaxDynamicShared, v.smem); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
