package cuda

import (
	"errors"
	"fmt"
	"log"
	"os"
	"runtime"
	"strconv"
	"strings"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
	"github.com/infernix/infernix/engine/sample"
)

// Options configure New.
type Options struct {
	Device         int    // device ordinal
	CacheDir       string // compiled-kernel cache ("" = $INFERNIX_KERNEL_CACHE or the user cache dir)
	NoGraphs       bool   // run every forward eagerly
	MaxGraphTokens int    // largest forward captured as a graph (0 = 16)
	// Logf receives progress lines (kernel compilation); nil logs nothing
	// unless INFERNIX_CUDA_VERBOSE is set.
	Logf func(format string, args ...any)
}

// Backend runs the operators on one CUDA device. See the package
// documentation for the threading rules.
type Backend struct {
	drv    *driver.Driver
	rtc    *driver.NVRTC
	lt     *driver.CublasLt // nil: cuBLASLt missing, every product runs in the GEMV kernels
	dev    driver.Device
	ctx    driver.Context
	stream driver.Stream
	tid    int // OS thread the context was last made current on

	name      string
	sm        int // compute capability ×10 (90 on Hopper)
	smCount   int
	maxSmem   int // opt-in shared memory per block
	smemPerSM int // shared memory per SM
	arch      string
	cubin     bool
	cacheDir  string
	logf      func(string, ...any)
	verbose   bool

	err error

	argv [maxArgs]uint64         // kernel parameter values of the launch in progress
	argp [maxArgs]unsafe.Pointer // pointers to argv's slots (what cuLaunchKernel reads)

	k      kernelSet
	attn   map[attnKey]*attnKernels
	mods   []driver.Module
	allocs map[driver.DevPtr]uint64
	slabs  weightSlabs // small weights packed into large allocations (slabs.go)
	bytes  uint64      // device bytes allocated

	meta      arena     // per-forward metadata, pinned host + device
	out       pinned    // ReadRows staging
	stageBuf  [2]pinned // Upload staging
	stageEv   [2]driver.Event
	scratch   [numScratch]devBuf
	ws        devBuf // cuBLASLt workspace
	gemms     map[gemmKey]*driver.Gemm
	ropes     map[*backend.Rope]*ropeTables
	moes      map[*backend.MoE]*moeTables
	f32w      map[driver.DevPtr]driver.DevPtr // f32 copies of small 16-bit weights (norm scales)
	mlpT      map[driver.DevPtr]driver.DevPtr // down weights transposed for mlp_fused (mlp.go)
	mlp       mlpConfig                       // the fused MLP (INFERNIX_CUDA_MLP=fused)
	oproj     oprojConfig                     // the merge folded into o_proj (INFERNIX_CUDA_OPROJ=fold)
	swigluOut driver.DevPtr                   // the last SwiGLU's output: a product reading it is a down projection (mlp.go)

	pend          pending
	fuse          bool          // operator fusion (fuse.go)
	fz            fuseParts     // which fusions, when fuse is on
	pdl           bool          // programmatic dependent launch for kernels that allow it
	pdlOK         bool          // the device and driver could do PDL
	pdlRefused    bool          // the driver refused a PDL launch: plain launches only
	globalDefs    []string      // -D defines for every module (PDL_TRIGGER)
	attnOld       bool          // decode attention through attn_split + attn_combine
	attnTC        bool          // decode attention through attn_decode_tc (unless INFERNIX_CUDA_DECODE_ATTN=simt or old)
	prefillRows   int           // rows of a tensor-core prefill tile: 64, or 128 (INFERNIX_CUDA_PREFILL_ROWS)
	attnBlocks    int           // blocks one decode-attention launch aims at (0: 2 per SM)
	attnDyn       int           // > 0: the folded decode attention's units of this many tiles handed out to its blocks (INFERNIX_CUDA_ATTN_DYN; dynUnits)
	attnAcc       bool          // with attnDyn: a block adds all its units into one partial (INFERNIX_CUDA_ATTN_ACC=1; ATTN_ACC)
	gemvWide      int           // split-K decode products: 0 off, -1 sized per launch, n ≥ 2 always n slices
	gemvWave      int           // fused products of more than one wave looped over one, up to this many blocks a block (gemvWaveGrid; 0 off)
	gemvWaveCap   int           // the blocks a looped grid holds (0: what fits the GPU; INFERNIX_CUDA_GEMV_WAVE_BLOCKS; tests set it so that small products loop too)
	gemvf         gemvfVariant  // the fused products' compile-time tunables (gemvf_variant.go)
	gemvfTimeline driver.DevPtr // GF_TIMING: where the fused products' warps record their timeline (0: nowhere)
	attnTimeline  driver.DevPtr // ATTN_TIMING: where the folded decode attention's blocks record theirs (0: nowhere)
	stepNames     *[]string     // STEP_TIMING's bench: each launch's kernel name, in order, as it is enqueued (nil: none)
	stepAfterLt   bool          // stepNames: a cuBLASLt product was enqueued since the last launch
	attnDeep      int           // decode attention through attn_decode_deep (1) or attn_decode_deep3 (3); 0: attn_decode
	attnTC2       bool          // INFERNIX_CUDA_DECODE_ATTN=tc2: attn_decode_tc2 where G ≤ 8 (transposed products)
	attnDefer     bool          // the folded decode attention's merge as its own kernel (INFERNIX_CUDA_ATTN_DEFER=0: in the last split)
	attnCluster   int           // > 1: the folded decode attention's splits, up to this many, merge through a cluster's shared memory (INFERNIX_CUDA_ATTN_CLUSTER; clusterSplits)
	skinny        bool          // bf16 products of 9–16 rows through gemm_skinny instead of cuBLASLt (INFERNIX_CUDA_SKINNY=1)
	inlineCopies  bool          // captured graphs keep their metadata copies where they were recorded (INFERNIX_CUDA_GRAPH_COPIES=inline)
	attnStages    int           // INFERNIX_CUDA_ATTN_STAGES: the decode attention's K/V stages (2 or 3; 0: by head dim)
	kvDT          kvDType       // element type of the KV caches made from now on (INFERNIX_CUDA_KV)
	launches      int           // kernel launches recorded (tests: did fusion happen)
	clusterRuns   int           // of them, launches in clusters (launchCluster)
	dynRuns       int           // folded decode attentions whose units were handed out (dynUnits)
	skinnyRuns    int           // of them, gemm_skinny launches (tests)
	writes        uint64        // records submitted, allocations, frees and synchronous uploads: anything that may write device memory
	xbf           bf16Reuse     // the activations last rounded to bf16 for cuBLASLt, reused by the next product of the same input
	noShadow      bool          // INFERNIX_CUDA_SHADOW=0: norms and SwiGLU write no bf16 copy (matmul.go shadowBF16)
	gemmAlgo      int           // INFERNIX_CUDA_GEMM_ALGO: cuBLASLt's k-th choice for decode batches (gemmAlgoFor)
	gemvMax       int
	copyRetries   int // host-to-device copies that needed a retry (diagnostics)
	attnMode      string
	prefillMin    int // smallest batch for the tensor-core prefill attention (0: default)

	moeGrouped     bool    // MoE prefill through per-expert GEMMs (moe_grouped.go; INFERNIX_CUDA_MOE_GROUPED=0 turns it off)
	moeHost        pinned  // the grouped path's copy of the chosen experts
	moePlan        moePlan // its per-expert row lists (reused storage)
	moeGroupedRuns int     // MoE calls that took the grouped path (tests, benchmarks)
	moeFused       bool    // MoE decode as moe_gateup + moe_down (moe_fused.go; INFERNIX_CUDA_MOE_FUSED=0 turns it off)
	moeFusedRuns   int     // MoE calls that took the fused path (tests, benchmarks)
	moeGroupT      int     // fused MoE decode of at least this many tokens groups them by expert (0: never; INFERNIX_CUDA_MOE_GROUP_T)
	moeGroupRuns   int     // fused MoE calls that grouped their tokens (tests, benchmarks)
	moeErr         error   // why kernels/moe.cu did not load (nil: it did)

	devSample   bool        // sampling on the device (sample.go)
	sampleWords []int32     // its staged parameters and lists
	sampleDraw  sample.Draw // scratch

	kvCaches           []*kvCache
	posCache           stagedRef
	attnCache          attnMeta
	hostMeta, hostOffs []int32
	runsCache          stagedRef // the forward's runs of sequences (recurrent.go)
	recErr             error     // why kernels/recurrent.cu did not load (nil: it did)
	runsHost           []int32

	g graphState
}

// maxArgs is the most 64-bit parameter slots a launch takes (struct MoeP
// of kernels/moe.cu takes 25, moeArgSlots).
const maxArgs = 25

var _ backend.Backend = (*Backend)(nil)
var _ backend.Checker = (*Backend)(nil)
var _ backend.MemoryReporter = (*Backend)(nil)
var _ backend.HalfWeights = (*Backend)(nil)

// HalfDType: the fused decode products, the grouped MoE GEMMs and the
// cuBLASLt prefill GEMMs are BF16 (f16 weights take the plain GEMV).
func (b *Backend) HalfDType() backend.DType { return backend.BF16 }

// New opens the CUDA libraries, makes the device's primary context current
// on the calling thread, compiles (or loads from the cache) the kernels and
// creates the stream. Errors wrapping driver.ErrNotAvailable mean the machine
// has no usable CUDA (no libcuda, no NVRTC, no device): fall back to the CPU.
func New(opt Options) (*Backend, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b := &Backend{logf: opt.Logf, verbose: os.Getenv("INFERNIX_CUDA_VERBOSE") != "", attn: map[attnKey]*attnKernels{},
		allocs: map[driver.DevPtr]uint64{}, gemms: map[gemmKey]*driver.Gemm{}, ropes: map[*backend.Rope]*ropeTables{},
		moes: map[*backend.MoE]*moeTables{}, f32w: map[driver.DevPtr]driver.DevPtr{}, mlpT: map[driver.DevPtr]driver.DevPtr{}}
	if b.logf == nil {
		b.logf = func(string, ...any) {}
		if b.verbose {
			b.logf = log.Printf
		}
	}
	for i := range b.argp {
		b.argp[i] = unsafe.Pointer(&b.argv[i])
	}
	var err error
	if b.drv, err = driver.LoadDriver(); err != nil {
		return nil, err
	}
	n, err := b.drv.DeviceCount()
	if err != nil {
		return nil, fmt.Errorf("%w: %v", driver.ErrNotAvailable, err)
	}
	if opt.Device < 0 || opt.Device >= n {
		return nil, fmt.Errorf("%w: CUDA device %d requested, %d present", driver.ErrNotAvailable, opt.Device, n)
	}
	if b.rtc, err = driver.LoadNVRTC(); err != nil {
		return nil, err
	}
	if b.dev, err = b.drv.Device(opt.Device); err != nil {
		return nil, err
	}
	major, err := b.drv.Attr(b.dev, driver.AttrComputeCapabilityMajor)
	if err != nil {
		return nil, err
	}
	minor, _ := b.drv.Attr(b.dev, driver.AttrComputeCapabilityMinor)
	b.sm = major*10 + minor
	if b.sm < 80 {
		return nil, fmt.Errorf("%w: compute capability %d.%d; the kernels need 8.0 or newer (bf16 tensor cores, cp.async)", driver.ErrNotAvailable, major, minor)
	}
	b.smCount, _ = b.drv.Attr(b.dev, driver.AttrMultiprocessorCount)
	b.maxSmem, _ = b.drv.Attr(b.dev, driver.AttrMaxSharedPerBlockOptin)
	b.smemPerSM, _ = b.drv.Attr(b.dev, driver.AttrMaxSharedPerSM)
	dname, _ := b.drv.DeviceName(b.dev)
	total, _ := b.drv.TotalMem(b.dev)
	if b.ctx, err = b.drv.PrimaryCtxRetain(b.dev); err != nil {
		return nil, err
	}
	if err := b.drv.SetCurrent(b.ctx); err != nil {
		b.drv.PrimaryCtxRelease(b.dev) //nolint:errcheck // already failing
		return nil, err
	}
	b.tid = unix.Gettid()
	if b.stream, err = b.drv.StreamCreate(driver.StreamNonBlocking); err != nil {
		b.release()
		return nil, err
	}
	b.arch, b.cubin = b.rtc.Target(b.sm)
	b.cacheDir = cacheDir(opt.CacheDir)
	// Where PDL kernels let the next one launch (kernels/prelude.cuh):
	// 0 at entry, 1 after their main loop, 2 at exit (the default).
	if v := os.Getenv("INFERNIX_CUDA_PDL_TRIGGER"); v == "0" || v == "1" {
		b.globalDefs = []string{"PDL_TRIGGER=" + v}
	}
	// INFERNIX_CUDA_DEFINES="NAME=V NAME2=V": more defines for every
	// module, for experiments on the device (a kernel's compile-time
	// tunables); the kernel cache keys them as any other option.
	global, shapes, bad := splitDefines(os.Getenv("INFERNIX_CUDA_DEFINES"))
	b.globalDefs = append(b.globalDefs, global...)
	for _, d := range bad {
		b.logf("cuda: INFERNIX_CUDA_DEFINES: %q is not NAME or NAME=VALUE; ignored", d)
	}
	spec := strings.TrimSpace(os.Getenv("INFERNIX_CUDA_GEMVF") + " " + strings.Join(shapes, " "))
	var verr error
	if b.gemvf, verr = parseGemvfVariant(spec); verr != nil {
		b.logf("cuda: INFERNIX_CUDA_GEMVF: %v; the default fused products are used", verr)
	}
	if err := b.loadKernels(); err != nil {
		b.release()
		return nil, err
	}
	if lt, err := driver.LoadCublasLt(b.drv); err == nil {
		b.lt = lt
		if err := b.ws.ensure(b, 32<<20); err != nil {
			b.release()
			return nil, err
		}
	} else {
		b.logf("cuda: cuBLASLt unavailable (%v); prefill products use the GEMV kernels", err)
	}
	if err := b.meta.init(b, 1<<20); err != nil {
		b.release()
		return nil, err
	}
	b.gemvMax = envInt("INFERNIX_CUDA_GEMV_MAX", 8)
	b.attnMode = os.Getenv("INFERNIX_CUDA_ATTN")
	b.fuse, b.fz = fuseConfig()
	b.mlpInit()
	b.oproj.on = strings.HasPrefix(os.Getenv("INFERNIX_CUDA_OPROJ"), "fold")
	b.oproj.headsFirst = os.Getenv("INFERNIX_CUDA_OPROJ") == "fold-heads"
	// Programmatic dependent launch needs Hopper's griddepcontrol and
	// cuLaunchKernelEx (CUDA 11.8+; inside graphs 12.3+). On unless
	// INFERNIX_CUDA_PDL=0. With kernels that let the next launch at entry
	// it cost 10% (runs 6–13: the next grid's waiting blocks slow the
	// running one); since they do so at exit (PDL_TRIGGER 2) it gains
	// 2–3% (run 14: 219.1 against 213.2 tok/s at 512, 167.7 against 164.0
	// at 32K).
	b.pdlOK = b.sm >= 90 && b.drv.HasLaunchEx() && b.drv.Version() >= 12030
	b.pdl = b.pdlOK && os.Getenv("INFERNIX_CUDA_PDL") != "0"
	b.attnOld = os.Getenv("INFERNIX_CUDA_DECODE_ATTN") == "old"
	// The tensor-core decode attention is the default where it compiles
	// (run 13: 152 tok/s at 32K against the SIMT kernel's 142).
	b.attnTC = os.Getenv("INFERNIX_CUDA_DECODE_ATTN") != "simt" && !b.attnOld
	b.attnTC2 = b.attnTC && os.Getenv("INFERNIX_CUDA_DECODE_ATTN") == "tc2"
	b.attnDefer = os.Getenv("INFERNIX_CUDA_ATTN_DEFER") != "0"
	if n, err := strconv.Atoi(os.Getenv("INFERNIX_CUDA_ATTN_CLUSTER")); err == nil && b.pdlOK {
		b.attnCluster = min(max(n, 0), 16) // CLUSTER_MAXZ
	}
	b.inlineCopies = os.Getenv("INFERNIX_CUDA_GRAPH_COPIES") == "inline"
	b.skinny = os.Getenv("INFERNIX_CUDA_SKINNY") == "1"
	b.prefillRows = 64
	if os.Getenv("INFERNIX_CUDA_PREFILL_ROWS") == "128" {
		b.prefillRows = 128
	}
	// On by default since run 13: a 4,096-token prefill of the
	// Qwen3-30B-A3B config (12 layers) at 18,213 tok/s against the indexed
	// path's 2,992, logits within 6e-3 of it.
	b.moeGrouped = os.Getenv("INFERNIX_CUDA_MOE_GROUPED") != "0"
	b.moeFused = os.Getenv("INFERNIX_CUDA_MOE_FUSED") != "0"
	b.moeGroupT = envInt("INFERNIX_CUDA_MOE_GROUP_T", 4)
	b.attnBlocks = envInt("INFERNIX_CUDA_ATTN_BLOCKS", 0)
	if u := envInt("INFERNIX_CUDA_ATTN_DYN", 0); u > 0 {
		b.attnDyn = max(u, 2) // a block's first unit holds the DSTAGES − 1 tiles it requests at once
	}
	b.attnAcc = os.Getenv("INFERNIX_CUDA_ATTN_ACC") == "1"
	b.attnStages = envInt("INFERNIX_CUDA_ATTN_STAGES", 0)
	b.gemvWide = gemvWideConfig(os.Getenv("INFERNIX_CUDA_GEMV_WIDE"))
	b.gemvWave = gemvWaveConfig(os.Getenv("INFERNIX_CUDA_GEMV_WAVE"))
	b.gemvWaveCap = max(envInt("INFERNIX_CUDA_GEMV_WAVE_BLOCKS", 0), 0)
	if d := envInt("INFERNIX_CUDA_ATTN_DEEP", 0); d == 1 || d == 3 {
		b.attnDeep = d
	}
	b.noShadow = os.Getenv("INFERNIX_CUDA_SHADOW") == "0"
	b.gemmAlgo = min(max(envInt("INFERNIX_CUDA_GEMM_ALGO", 0), 0), 7)
	var ok bool
	if b.kvDT, ok = kvDTypeFromEnv(os.Getenv("INFERNIX_CUDA_KV")); !ok {
		b.logf("cuda: INFERNIX_CUDA_KV=%q is not f16 or bf16; the KV cache stays f16", os.Getenv("INFERNIX_CUDA_KV"))
	}
	b.g.init(b, opt)
	if sampleOn() {
		if err := b.enableSampling(); err != nil {
			b.logf("cuda: sampling on the device is off: %v", err)
		}
	}
	b.name = fmt.Sprintf("cuda (%s, sm_%d, %d SMs, %.0f GiB, driver %d.%d, NVRTC %s)", dname, b.sm, b.smCount,
		float64(total)/(1<<30), b.drv.Version()/1000, b.drv.Version()%1000/10, b.rtc.Version())
	if b.kvDT != kvBF16 {
		b.name = strings.TrimSuffix(b.name, ")") + ", KV cache " + b.kvDT.String() + ")" // recorded with bench figures
	}
	return b, nil
}

// validMacro reports whether s is a C identifier.
func validMacro(s string) bool {
	for i, r := range s {
		if !(r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || i > 0 && '0' <= r && r <= '9') {
			return false
		}
	}
	return s != ""
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v >= 0 {
		return v
	}
	return def
}

func (b *Backend) Name() string { return b.name }

// Err is the first CUDA failure, if any (backend.Checker).
func (b *Backend) Err() error { return b.err }

// fail records the first failure; later operators are skipped.
func (b *Backend) fail(err error) {
	if err != nil && b.err == nil {
		b.err = err
		b.logf("cuda: %v", err)
		if b.g.mode == modeCapture {
			b.pin()
			defer b.unpin()
			if gr, _ := b.drv.EndCapture(b.stream); gr != 0 {
				b.drv.GraphDestroy(gr) //nolint:errcheck // already failing
			}
		}
		b.g.mode = modeEager
	}
}

// pin locks the goroutine to its OS thread and makes the context current
// there; every path that calls the driver does this (pins nest).
func (b *Backend) pin() {
	runtime.LockOSThread()
	b.bind()
}

func (b *Backend) unpin() { runtime.UnlockOSThread() }

// bind makes the context current on the calling OS thread if it is not the
// one it was last bound to. The caller holds runtime.LockOSThread.
//
// Every driver call runs on the driver's device thread (see
// driver.executor), where New made the context current, so there is
// nothing to rebind; bind only reports whether the backend is usable.
func (b *Backend) bind() bool {
	return b.err == nil || b.ctx != 0
}

// Memory reports free and total device memory and what this backend holds
// (backend.MemoryReporter).
func (b *Backend) Memory() (free, total, allocated uint64, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if !b.bind() {
		return 0, 0, b.bytes, b.err
	}
	free, total, err = b.drv.MemGetInfo()
	return free, total, b.bytes, err
}

// malloc allocates device memory, turning an out-of-memory into an error
// with the numbers. The caller holds the OS thread.
func (b *Backend) malloc(n uint64, what string) (driver.DevPtr, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if !b.bind() {
		return 0, b.err
	}
	if n == 0 {
		n = 256
	}
	b.writes++
	p, err := b.drv.MemAlloc(n)
	if err != nil {
		var de *driver.Error
		if errors.As(err, &de) && de.Code == driver.ErrOutOfMemory {
			free, total, _ := b.drv.MemGetInfo()
			return 0, fmt.Errorf("cuda: out of device memory allocating %s (%.2f GiB): %.2f GiB free of %.2f GiB, %.2f GiB held by this backend",
				what, gib(n), gib(free), gib(total), gib(b.bytes))
		}
		return 0, err
	}
	b.allocs[p] = n
	b.bytes += n
	return p, nil
}

func gib(n uint64) float64 { return float64(n) / (1 << 30) }

func (b *Backend) free(p driver.DevPtr) {
	if b.releaseWeight(p) {
		return
	}
	b.freeAlloc(p)
}

// freeAlloc frees an allocation of malloc's.
func (b *Backend) freeAlloc(p driver.DevPtr) {
	b.pin()
	defer b.unpin()
	b.writes++
	if n, ok := b.allocs[p]; ok {
		b.drv.MemFree(p) //nolint:errcheck // freeing: nothing to do about it
		delete(b.allocs, p)
		b.bytes -= n
	}
}

// Close waits for the device, frees everything and releases the context.
// The backend must not be used afterwards.
func (b *Backend) Close() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if b.drv == nil {
		return nil
	}
	b.bind()
	b.g.closeAll()
	b.drv.StreamSynchronize(b.stream) //nolint:errcheck // closing
	b.release()
	return nil
}

func (b *Backend) release() {
	for _, g := range b.gemms {
		g.Destroy()
	}
	b.gemms = map[gemmKey]*driver.Gemm{}
	if b.lt != nil {
		b.lt.Close() //nolint:errcheck // closing
		b.lt = nil
	}
	b.slabs = weightSlabs{}
	for p := range b.allocs {
		b.free(p)
	}
	b.meta.close(b)
	b.out.close(b)
	b.moeHost.close(b)
	for i := range b.stageBuf {
		b.stageBuf[i].close(b)
		if b.stageEv[i] != 0 {
			b.drv.EventDestroy(b.stageEv[i]) //nolint:errcheck // closing
			b.stageEv[i] = 0
		}
	}
	for _, m := range b.mods {
		b.drv.ModuleUnload(m) //nolint:errcheck // closing
	}
	b.mods = nil
	if b.stream != 0 {
		b.drv.StreamDestroy(b.stream) //nolint:errcheck // closing
		b.stream = 0
	}
	if b.ctx != 0 {
		b.drv.PrimaryCtxRelease(b.dev) //nolint:errcheck // closing
		b.ctx = 0
	}
	if b.err == nil {
		b.err = errors.New("cuda: backend closed")
	}
}

// sync waits for the stream. The caller holds the OS thread.
func (b *Backend) sync() {
	b.flush()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if b.err != nil || !b.bind() {
		return
	}
	b.fail(b.drv.StreamSynchronize(b.stream))
}

// RunOnDeviceThread runs f on the OS thread that owns the device (every
// CUDA call goes through that thread; see the package documentation) and
// returns when f does. Backend calls made by f cost no hand-over (about
// 30 µs each otherwise, which matters for eager forwards: prefill chunks,
// the first steps of a batch size). Other goroutines' backend calls wait
// until f returns, so f should be the loop of the one goroutine that uses
// the backend (backend.DeviceThreadRunner).
func (b *Backend) RunOnDeviceThread(f func()) { b.drv.Run(f) }

var _ backend.DeviceThreadRunner = (*Backend)(nil)
