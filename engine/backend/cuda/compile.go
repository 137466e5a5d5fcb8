package cuda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/infernix/infernix/engine/backend/cuda/driver"
	"github.com/infernix/infernix/kernels"
)

// kernel is a resolved extern "C" function of a loaded module. pdl marks
// kernels that run PDL_WAIT in every block before touching earlier work's
// data (kernels/prelude.cuh), so they may be launched with programmatic
// dependent launch.
type kernel struct {
	name string
	fn   driver.Function
	pdl  bool
	regs int // registers per thread (sizing split-K grids to what fits at once)
}

var dtName = [3]string{"f32", "f16", "bf16"} // indexed by backend.DType

// kernelSet holds the kernels of the model-independent modules.
type kernelSet struct {
	embed                                 [3]*kernel
	rmsWarp, rmsBlock, add, add4          *kernel
	swiglu, swiglu4, rope, gather, toBF16 *kernel
	bf16ToF32, f16ToF32, sigAdd           *kernel
	kvStore, fill                         [numKVDTypes]*kernel // kv_store, fill_random_*: per KV element type
	gemv                                  [3][4]*kernel        // dtype × R ∈ {1, 2, 4, 8}
	gemv3                                 [4]*kernel           // bf16, R ∈ {1, 2, 4, 8}
	gemvf                                 [3][2][4]*kernel     // fused decode products: mode × norm × R (kernels/gemv.cu)
	gemvfw                                [3][2][4]*kernel     // the same, split over I (INFERNIX_CUDA_GEMV_WIDE)
	addRMS, addRMSBF, swiglu4BF           *kernel              // addRMSBF, swiglu4BF: also write bf16 for cuBLASLt (matmul.go shadowBF16)
	gemvScalar, gemvIdx, gemvIdxScalar    [3]*kernel
	moeRoute, moeCombine, moeCombineRows  *kernel
	moeGateUp, moeDown                    *kernel // kernels/moe.cu: MoE decode in two launches (moe_fused.go)
	moePlan, moeGateUpG, moeDownG         *kernel // kernels/moe.cu: MoE decode of several tokens, grouped by expert
	moeCombineG                           *kernel
	skinny                                *kernel // gemm_skinny_n2: bf16 products of 9–16 rows (INFERNIX_CUDA_SKINNY)
	mlpFused, transposeBF16               *kernel // kernels/mlp.cu, loaded where INFERNIX_CUDA_MLP=fused (mlp.go)
	sample                                *kernel // nil unless sampling on the device is on (sample.go)
	// kernels/recurrent.cu: the hybrid models' operators (recurrent.go).
	conv, convState, rmsGated, mulSig, sliceCols *kernel
	gdn, gdnNarrow                               map[int]*kernel // gdn_recurrent_k<KD> (128 threads) and _w (32), by key head dim
}

// attnKernels are compiled per (head dim, group size).
type attnKernels struct {
	split, combine *kernel
	splitSmem      int     // dynamic shared memory of split (its K/V tiles)
	decode         *kernel // split + combine in one launch (flash decoding)
	decodeSmem     int
	// attn_decode_deep (2 stages) and attn_decode_deep3 (INFERNIX_CUDA_ATTN_DEEP=1, 3):
	// 256 threads, swizzled rows; their dynamic shared memory and how many
	// blocks of each fit an SM.
	deep, deep3           *kernel
	decodeTC              *kernel             // attn_decode_tc (INFERNIX_CUDA_DECODE_ATTN=tc): head dims that are multiples of 16 up to 128
	decodeTCPrep          *kernel             // attn_decode_tc with attn_prep folded in (one token per sequence)
	mergeSplits           *kernel             // attn_merge_splits: decodeTCPrep's splits merged (unless INFERNIX_CUDA_ATTN_DEFER=0)
	mergeWide             *kernel             // attn_merge_wide: the same where a launch has more than 64 splits' slots
	oproj                 *kernel             // attn_oproj: a token's merge folded into the o-projection (oproj.go)
	decodeTCPerSM         int                 // blocks of attn_decode_tc that fit an SM
	decodeTC2             *kernel             // attn_decode_tc2 (INFERNIX_CUDA_DECODE_ATTN=tc2): the transposed products, G ≤ 8
	decodeTC2Prep         *kernel             // and with attn_prep folded in
	clusterFit            map[clusterKey]bool // clusterFits' answers
	deepSmem, deep3Smem   int
	deepPerSM, deep3PerSM int
	prep                  *kernel  // QK-norm + RoPE + KV store
	prefill               *kernel  // nil where the tensor-core kernel does not apply
	prefill128            *kernel  // the same with 128-row tiles (INFERNIX_CUDA_PREFILL_ROWS=128; prefillRows128 compiles it)
	defs                  []string // the modules' defines (prefillRows128)
	prefillSmem           int
}

func cacheDir(opt string) string {
	if opt != "" {
		return opt
	}
	if d := os.Getenv("INFERNIX_KERNEL_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "infernix", "kernels")
	}
	return filepath.Join(os.TempDir(), "infernix-kernels")
}

// compile returns the image of module name with the given -D defines, from
// the disk cache when present. The cache key covers the source (prelude
// included), the options, the target architecture and the NVRTC version.
func (b *Backend) compile(name string, defines []string) ([]byte, error) {
	src, err := kernels.Source(name)
	if err != nil {
		return nil, err
	}
	opts := []string{"--gpu-architecture=" + b.arch, "--std=c++17", "-default-device"}
	for _, d := range defines {
		opts = append(opts, "-D"+d)
	}
	// The backend's defines for every module, unless the module's own
	// defines name the same macro (a variant under test).
	for _, d := range b.globalDefs {
		name, _, _ := strings.Cut(d, "=")
		own := false
		for _, m := range defines {
			if n, _, _ := strings.Cut(m, "="); n == name {
				own = true
			}
		}
		if !own {
			opts = append(opts, "-D"+d)
		}
	}
	h := sha256.New()
	fmt.Fprintf(h, "infernix-kernels v1\x00%s\x00%s\x00%s\x00%v\x00", src, strings.Join(opts, "\x00"), b.rtc.Version(), b.cubin)
	key := hex.EncodeToString(h.Sum(nil))[:32]
	ext := ".ptx"
	if b.cubin {
		ext = ".cubin"
	}
	file := filepath.Join(b.cacheDir, strings.TrimSuffix(name, ".cu")+"-"+key+ext)
	if img, err := os.ReadFile(file); err == nil && len(img) > 0 {
		return img, nil
	}
	t0 := time.Now()
	img, log, err := b.rtc.Compile(src, name, opts, b.cubin)
	if err != nil {
		return nil, fmt.Errorf("compiling kernels/%s %v: %w", name, defines, err)
	}
	if !b.cubin {
		img = append(img, 0) // cuModuleLoadData reads PTX as a C string
	}
	var all []string
	for _, o := range opts {
		if d, ok := strings.CutPrefix(o, "-D"); ok {
			all = append(all, d)
		}
	}
	b.logf("cuda: compiled kernels/%s %v for %s in %v", name, all, b.arch, time.Since(t0).Round(time.Millisecond))
	if log != "" && b.verbose {
		b.logf("cuda: NVRTC log for %s:\n%s", name, log)
	}
	if err := os.MkdirAll(b.cacheDir, 0o755); err == nil {
		if f, err := os.CreateTemp(b.cacheDir, ".tmp-*"); err == nil {
			_, werr := f.Write(img)
			cerr := f.Close()
			if werr == nil && cerr == nil {
				os.Rename(f.Name(), file) //nolint:errcheck // a cache miss next time is harmless
			} else {
				os.Remove(f.Name())
			}
		}
	}
	return img, nil
}

// load compiles (or reads from the cache) and loads a module, then resolves
// the named kernels into the given destinations. The caller holds the thread.
func (b *Backend) load(name string, defines []string, fns map[string]**kernel) error {
	img, err := b.compile(name, defines)
	if err != nil {
		return err
	}
	b.pin()
	defer b.unpin()
	if b.err != nil {
		return b.err
	}
	mod, err := b.drv.ModuleLoadData(img)
	if err != nil {
		return fmt.Errorf("loading kernels/%s: %w", name, err)
	}
	b.mods = append(b.mods, mod)
	for n, dst := range fns {
		f, err := b.drv.ModuleGetFunction(mod, n)
		if err != nil {
			return fmt.Errorf("kernels/%s: %w", name, err)
		}
		// Every kernel of these modules begins with PDL_ENTRY (the
		// tensor-core prefill kernel does not).
		*dst = &kernel{name: n, fn: f, pdl: name != "prefill.cu"}
		(*dst).regs, _ = b.drv.FuncGetAttribute(f, driver.FuncAttrNumRegs)
		if b.verbose {
			regs := (*dst).regs
			local, _ := b.drv.FuncGetAttribute(f, driver.FuncAttrLocalSizeBytes)
			b.logf("cuda: %s: %d registers, %d bytes local memory", n, regs, local)
		}
	}
	return nil
}

// loadKernels loads the model-independent modules.
func (b *Backend) loadKernels() error {
	k := &b.k
	ew := map[string]**kernel{
		"rmsnorm_warp": &k.rmsWarp, "rmsnorm_block": &k.rmsBlock, "add_f32": &k.add, "add_f32x4": &k.add4,
		"swiglu_f32": &k.swiglu, "swiglu_f32x4": &k.swiglu4, "rope_f32": &k.rope, "gather_f32": &k.gather,
		"to_bf16": &k.toBF16, "bf16_to_f32_k": &k.bf16ToF32, "f16_to_f32_k": &k.f16ToF32, "kv_store": &k.kvStore[kvBF16],
		"kv_store_f16": &k.kvStore[kvF16], "sigmoid_gated_add": &k.sigAdd, "fill_random_bf16": &k.fill[kvBF16],
		"fill_random_f16": &k.fill[kvF16], "add_rmsnorm": &k.addRMS,
		"add_rmsnorm_bf": &k.addRMSBF, "swiglu_f32x4_bf": &k.swiglu4BF,
	}
	gv := map[string]**kernel{"moe_route": &k.moeRoute, "moe_combine": &k.moeCombine, "moe_combine_rows": &k.moeCombineRows,
		"gemm_skinny_n2": &k.skinny}
	for n, dst := range gemvfNames(k, true) {
		gv[n] = dst
	}
	for d, n := range dtName {
		ew["embed_"+n] = &k.embed[d]
		for i, r := range []int{1, 2, 4, 8} {
			gv[fmt.Sprintf("gemv_%s_r%d", n, r)] = &k.gemv[d][i]
			if n == "bf16" {
				gv[fmt.Sprintf("gemv3_bf16_r%d", r)] = &k.gemv3[i]
			}
		}
		gv["gemv_scalar_"+n] = &k.gemvScalar[d]
		gv["gemv_indexed_"+n] = &k.gemvIdx[d]
		gv["gemv_indexed_scalar_"+n] = &k.gemvIdxScalar[d]
	}
	rc := map[string]**kernel{"conv1d_silu": &k.conv, "conv1d_state": &k.convState, "rmsnorm_gated": &k.rmsGated,
		"mul_sigmoid": &k.mulSig, "slice_cols": &k.sliceCols}
	k.gdn, k.gdnNarrow = map[int]*kernel{}, map[int]*kernel{}
	gdn := make([]*kernel, 2*len(gdnKeyDims))
	for i, kd := range gdnKeyDims {
		rc[fmt.Sprintf("gdn_recurrent_k%d", kd)] = &gdn[2*i]
		rc[fmt.Sprintf("gdn_recurrent_k%d_w", kd)] = &gdn[2*i+1]
	}
	// Only the hybrid models need this module: if it does not load, they
	// fail at load with the reason (CheckGDN) and the rest still runs.
	if err := b.load("recurrent.cu", nil, rc); err != nil {
		b.recErr = err
		b.logf("cuda: %v; hybrid models (Qwen3-Next, Qwen3.5) will not load on this device", err)
	} else {
		for i, kd := range gdnKeyDims {
			k.gdn[kd], k.gdnNarrow[kd] = gdn[2*i], gdn[2*i+1]
		}
	}
	// The fused MoE decode falls back to the indexed path without it.
	// INFERNIX_CUDA_MOE_DEFINES ("MOE_UG=2 MOE_GU_MINB=6"): its tunables,
	// for measuring them without recompiling the other modules.
	if err := b.load("moe.cu", strings.Fields(os.Getenv("INFERNIX_CUDA_MOE_DEFINES")), map[string]**kernel{"moe_gateup": &k.moeGateUp, "moe_down": &k.moeDown,
		"moe_plan": &k.moePlan, "moe_gateup_g": &k.moeGateUpG, "moe_down_g": &k.moeDownG, "moe_combine_g": &k.moeCombineG}); err != nil {
		k.moeGateUp, k.moeDown, b.moeErr = nil, nil, err
		k.moePlan, k.moeGateUpG, k.moeDownG, k.moeCombineG = nil, nil, nil, nil
		b.logf("cuda: %v; MoE decode takes the indexed path", err)
	}
	if err := b.load("elementwise.cu", nil, ew); err != nil {
		return err
	}
	if err := b.load("gemv.cu", b.gemvf.defs, gv); err != nil {
		return err
	}
	return b.gemvfSmem(b.gemvf)
}

// attnKey names one compilation of the attention modules.
type attnKey struct {
	hd, g  int
	dt     kvDType
	stages int  // DSTAGES (0: the kernel's default)
	dyn    bool // ATTN_DYN (INFERNIX_CUDA_ATTN_DYN)
	acc    bool // ATTN_ACC (INFERNIX_CUDA_ATTN_ACC, with dyn)
}

// attnFor returns the attention kernels for head dim hd, group size g and
// KV element type dt, compiling them on first use.
func (b *Backend) attnFor(hd, g int, dt kvDType) (*attnKernels, error) {
	stages := 3 // DSTAGES in kernels/attention.cu: 3 up to head dim 128, 2 above
	if hd > 128 {
		stages = 2
	}
	if b.attnStages == 2 || b.attnStages == 3 && hd <= 128 {
		stages = b.attnStages
	}
	key := attnKey{hd, g, dt, stages, b.attnDyn > 0, b.attnDyn > 0 && b.attnAcc}
	if a := b.attn[key]; a != nil {
		return a, nil
	}
	if hd < 8 || hd > 256 || hd%8 != 0 {
		return nil, fmt.Errorf("cuda: head_dim %d is not supported (a multiple of 8 from 8 to 256)", hd)
	}
	if g < 1 || g > 16 {
		return nil, fmt.Errorf("cuda: %d query heads per KV head is not supported (1…16)", g)
	}
	b.needEager() // compiling and loading a module is no graph work
	b.pin()
	defer b.unpin()
	a := &attnKernels{}
	defs := []string{fmt.Sprintf("HD=%d", hd), fmt.Sprintf("G=%d", g), dt.define()}
	if stages != 3 && hd <= 128 {
		defs = append(defs, fmt.Sprintf("DSTAGES=%d", stages))
	}
	if b.attnDyn > 0 {
		defs = append(defs, "ATTN_DYN=1")
		if b.attnAcc {
			defs = append(defs, "ATTN_ACC=1")
		}
	}
	names := map[string]**kernel{"attn_split": &a.split, "attn_combine": &a.combine,
		"attn_decode": &a.decode, "attn_prep": &a.prep, "attn_decode_deep": &a.deep, "attn_decode_deep3": &a.deep3}
	if hd%16 == 0 && hd <= 128 { // the guard around attn_decode_tc in kernels/attention.cu
		names["attn_decode_tc"] = &a.decodeTC
		names["attn_decode_tc_prep"] = &a.decodeTCPrep
		names["attn_merge_splits"] = &a.mergeSplits
		names["attn_merge_wide"] = &a.mergeWide
		names["attn_oproj"] = &a.oproj
		if g <= 8 { // the guard around attn_decode_tc2
			names["attn_decode_tc2"] = &a.decodeTC2
			names["attn_decode_tc2_prep"] = &a.decodeTC2Prep
		}
	}
	if err := b.load("attention.cu", defs, names); err != nil {
		return nil, err
	}
	a.decodeSmem = stages * 2 * 64 * (hd + 8) * 2
	if a.decodeSmem > b.maxSmem-20<<10 {
		return nil, fmt.Errorf("cuda: head_dim %d needs %d bytes of shared memory per block; the device allows %d", hd, a.decodeSmem, b.maxSmem)
	}
	if err := b.drv.FuncSetAttribute(a.decode.fn, driver.FuncAttrMaxDynamicShared, a.decodeSmem); err != nil {
		return nil, err
	}
	for _, k := range []*kernel{a.decodeTC, a.decodeTCPrep, a.decodeTC2, a.decodeTC2Prep} { // the same stages as attn_decode
		if k == nil {
			continue
		}
		if err := b.drv.FuncSetAttribute(k.fn, driver.FuncAttrMaxDynamicShared, a.decodeSmem); err != nil {
			return nil, err
		}
	}
	if a.decodeTC != nil {
		static, _ := b.drv.FuncGetAttribute(a.decodeTC.fn, driver.FuncAttrSharedSizeBytes)
		a.decodeTCPerSM = blocksPerSM(128, a.decodeTC.regs, a.decodeSmem+static, b.smemPerSM)
	}
	// The deep kernels: rows unpadded (swizzled) where hd is a multiple
	// of 64 (DSWZ_DEEP), 2 stages, or 3 (deep3) up to head dim 128.
	row := hd + 8
	if hd%64 == 0 {
		row = hd
	}
	a.deepSmem = 2 * 2 * 64 * row * 2
	a.deep3Smem = stages * 2 * 64 * row * 2
	for _, d := range []struct {
		k     *kernel
		smem  int
		perSM *int
	}{{a.deep, a.deepSmem, &a.deepPerSM}, {a.deep3, a.deep3Smem, &a.deep3PerSM}} {
		if d.smem > b.maxSmem-32<<10 {
			continue // perSM stays 0: not used
		}
		if err := b.drv.FuncSetAttribute(d.k.fn, driver.FuncAttrMaxDynamicShared, d.smem); err != nil {
			return nil, err
		}
		static, _ := b.drv.FuncGetAttribute(d.k.fn, driver.FuncAttrSharedSizeBytes)
		*d.perSM = blocksPerSM(256, d.k.regs, d.smem+static, b.smemPerSM)
	}
	a.splitSmem = 2 * 128 * (hd + 8) * 2
	if a.splitSmem > b.maxSmem-16<<10 {
		return nil, fmt.Errorf("cuda: head_dim %d needs %d bytes of shared memory per block; the device allows %d", hd, a.splitSmem, b.maxSmem)
	}
	if err := b.drv.FuncSetAttribute(a.split.fn, driver.FuncAttrMaxDynamicShared, a.splitSmem); err != nil {
		return nil, err
	}
	if hd%16 == 0 && hd&(hd-1) == 0 && hd <= 128 && g <= 16 && g&(g-1) == 0 {
		a.prefillSmem = 4 * 64 * (hd + 8) * 2
		if a.prefillSmem <= b.maxSmem {
			if err := b.load("prefill.cu", defs, map[string]**kernel{"attn_prefill": &a.prefill}); err != nil {
				return nil, err
			}
			if err := b.drv.FuncSetAttribute(a.prefill.fn, driver.FuncAttrMaxDynamicShared, a.prefillSmem); err != nil {
				return nil, err
			}
			a.defs = defs
		}
	}
	b.attn[key] = a
	return a, nil
}

// prefillRows128 returns a's prefill kernel with 128-row tiles, compiling
// it on first use; nil where the tensor-core prefill does not apply.
func (b *Backend) prefillRows128(a *attnKernels) *kernel {
	if a.prefill128 != nil || a.prefill == nil {
		return a.prefill128
	}
	b.needEager()
	b.pin()
	defer b.unpin()
	var k *kernel
	if err := b.load("prefill.cu", append(a.defs[:len(a.defs):len(a.defs)], "PF_ROWS=128"), map[string]**kernel{"attn_prefill": &k}); err != nil {
		b.fail(err)
		return nil
	}
	if err := b.drv.FuncSetAttribute(k.fn, driver.FuncAttrMaxDynamicShared, a.prefillSmem); err != nil {
		b.fail(err)
		return nil
	}
	a.prefill128 = k
	return k
}

// blocksPerSM is how many blocks of threads threads, regs registers each
// and smem bytes of shared memory (static + dynamic) fit one SM at once
// (64K registers allocated per warp in units of 256, 2,048 threads, 1 KB of
// shared memory reserved per block); 2 where the SM's shared memory is
// unknown.
func blocksPerSM(threads, regs, smem, smemPerSM int) int {
	if smemPerSM <= 0 {
		return 2
	}
	warps := (threads + 31) / 32
	n := 2048 / threads
	if regs > 0 {
		n = min(n, 65536/(warps*((regs*32+255)&^255)))
	}
	return max(1, min(n, smemPerSM/(smem+1024)))
}
