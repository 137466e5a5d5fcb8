package driver

import (
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ebitengine/purego"
)

// cuBLASLt enums (cublasLt.h, library_types.h).
const (
	DataF32  = 0  // CUDA_R_32F
	DataF16  = 2  // CUDA_R_16F
	DataBF16 = 14 // CUDA_R_16BF

	Compute32F = 68 // CUBLAS_COMPUTE_32F

	OpN = 0
	OpT = 1

	descTransA       = 3 // CUBLASLT_MATMUL_DESC_TRANSA
	descTransB       = 4 // CUBLASLT_MATMUL_DESC_TRANSB
	prefMaxWorkspace = 1 // CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
)

// heuristicResult mirrors cublasLtMatmulHeuristicResult_t: algo (64 bytes),
// workspaceSize, state, wavesCount, reserved[4].
type heuristicResult struct {
	algo          [8]uint64
	workspaceSize uint64
	state         int32
	waves         float32
	reserved      [4]int32
}

// CublasLt is the opened cuBLASLt with one handle.
type CublasLt struct {
	lib     *library
	ex      *executor
	handle  uintptr
	Version int

	create, destroy, descCreate, descDestroy, descSet, layoutCreate, layoutDestroy uintptr
	prefCreate, prefDestroy, prefSet, heuristic, matmul, statusName                uintptr
}

// LoadCublasLt opens libcublasLt and creates a handle; its calls run on d's
// device thread (where the context is current).
func LoadCublasLt(d *Driver) (*CublasLt, error) {
	lib, err := open("libcublasLt",
		[]string{"libcublasLt.so", "libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11"},
		[]string{"libcublasLt.so.1[1-9]*", "libcublasLt.so"}, nil)
	if err != nil {
		return nil, notAvailable(err)
	}
	c := &CublasLt{lib: lib, ex: d.ex}
	var version uintptr
	if err := lib.syms(map[string]*uintptr{
		"cublasLtCreate": &c.create, "cublasLtDestroy": &c.destroy, "cublasLtMatmulDescCreate": &c.descCreate,
		"cublasLtMatmulDescDestroy": &c.descDestroy, "cublasLtMatmulDescSetAttribute": &c.descSet,
		"cublasLtMatrixLayoutCreate": &c.layoutCreate, "cublasLtMatrixLayoutDestroy": &c.layoutDestroy,
		"cublasLtMatmulPreferenceCreate": &c.prefCreate, "cublasLtMatmulPreferenceDestroy": &c.prefDestroy,
		"cublasLtMatmulPreferenceSetAttribute": &c.prefSet, "cublasLtMatmulAlgoGetHeuristic": &c.heuristic,
		"cublasLtMatmul": &c.matmul, "cublasLtGetVersion": &version,
	}); err != nil {
		return nil, notAvailable(err)
	}
	c.statusName = lib.optSym("cublasLtGetStatusName")
	r, _, _ := purego.SyscallN(version)
	c.Version = int(r)
	if err := c.check("cublasLtCreate", c.create, uintptr(unsafe.Pointer(&c.handle))); err != nil {
		return nil, err
	}
	return c, nil
}

// Path is the library file that was opened.
func (c *CublasLt) Path() string { return c.lib.path }

// Close destroys the handle.
func (c *CublasLt) Close() error {
	if c.handle == 0 {
		return nil
	}
	err := c.check("cublasLtDestroy", c.destroy, c.handle)
	c.handle = 0
	return err
}

//go:uintptrescapes
func (c *CublasLt) check(call string, fn uintptr, args ...uintptr) error {
	r := c.ex.call(fn, args...)
	if s := status(r); s != 0 {
		return c.statusErr(call, s)
	}
	return nil
}

func (c *CublasLt) statusErr(call string, s int) error {
	e := &Error{Call: call, Code: s, Name: fmt.Sprintf("cublasStatus %d", s)}
	if c.statusName != 0 {
		p, _, _ := purego.SyscallN(c.statusName, uintptr(s))
		if n := cString(p); n != "" {
			e.Name = n
		}
	}
	return e
}

// Gemm is a planned matrix product D = op(A)·op(B) in cuBLAS's column-major
// terms, with its descriptors and chosen algorithm; plan once per shape and
// run many times (also inside a captured graph: it never allocates).
type Gemm struct {
	c                  *CublasLt
	desc               uintptr
	a, b, d            uintptr
	algo               heuristicResult
	alpha, beta        float32
	M, N, K            int
	Workspace          uint64
	typeA, typeB, typD int
}

// PlanGemm plans D[M×N] = op(A)[M×K] · op(B)[K×N] with leading dimensions
// lda, ldb, ldd (column-major), F32 accumulation and F32 alpha/beta, with
// cuBLASLt's first-choice algorithm.
func (c *CublasLt) PlanGemm(transA, transB int, M, N, K int, typeA, lda, typeB, ldb, typeD, ldd int, workspace uint64) (*Gemm, error) {
	return c.PlanGemmAlgo(transA, transB, M, N, K, typeA, lda, typeB, ldb, typeD, ldd, workspace, 0)
}

// PlanGemmAlgo is PlanGemm with the algo-th of cuBLASLt's heuristic
// choices (0 the first; past the last it offers, the last).
func (c *CublasLt) PlanGemmAlgo(transA, transB int, M, N, K int, typeA, lda, typeB, ldb, typeD, ldd int, workspace uint64, algo int) (*Gemm, error) {
	g := &Gemm{c: c, M: M, N: N, K: K, alpha: 1, beta: 0, typeA: typeA, typeB: typeB, typD: typeD}
	if err := c.check("cublasLtMatmulDescCreate", c.descCreate, uintptr(unsafe.Pointer(&g.desc)), Compute32F, DataF32); err != nil {
		return nil, err
	}
	ta, tb := int32(transA), int32(transB)
	if err := c.check("cublasLtMatmulDescSetAttribute(TRANSA)", c.descSet, g.desc, descTransA, uintptr(unsafe.Pointer(&ta)), 4); err != nil {
		g.Destroy()
		return nil, err
	}
	if err := c.check("cublasLtMatmulDescSetAttribute(TRANSB)", c.descSet, g.desc, descTransB, uintptr(unsafe.Pointer(&tb)), 4); err != nil {
		g.Destroy()
		return nil, err
	}
	rowsA, colsA := M, K
	if transA == OpT {
		rowsA, colsA = K, M
	}
	rowsB, colsB := K, N
	if transB == OpT {
		rowsB, colsB = N, K
	}
	for _, l := range []struct {
		dst        *uintptr
		typ        int
		rows, cols int
		ld         int
	}{{&g.a, typeA, rowsA, colsA, lda}, {&g.b, typeB, rowsB, colsB, ldb}, {&g.d, typeD, M, N, ldd}} {
		if err := c.check("cublasLtMatrixLayoutCreate", c.layoutCreate, uintptr(unsafe.Pointer(l.dst)), uintptr(l.typ),
			uintptr(l.rows), uintptr(l.cols), uintptr(l.ld)); err != nil {
			g.Destroy()
			return nil, err
		}
	}
	var pref uintptr
	if err := c.check("cublasLtMatmulPreferenceCreate", c.prefCreate, uintptr(unsafe.Pointer(&pref))); err != nil {
		g.Destroy()
		return nil, err
	}
	defer c.check("cublasLtMatmulPreferenceDestroy", c.prefDestroy, pref) //nolint:errcheck // cleanup
	ws := workspace
	if err := c.check("cublasLtMatmulPreferenceSetAttribute", c.prefSet, pref, prefMaxWorkspace, uintptr(unsafe.Pointer(&ws)), 8); err != nil {
		g.Destroy()
		return nil, err
	}
	algo = min(max(algo, 0), 7)
	// On the heap: the call may run on the device thread while this
	// goroutine waits, and a waiting goroutine's stack can move.
	res, np := new([8]heuristicResult), new(int32)
	err := c.check(fmt.Sprintf("cublasLtMatmulAlgoGetHeuristic(M=%d N=%d K=%d)", M, N, K), c.heuristic, c.handle, g.desc,
		g.a, g.b, g.d, g.d, pref, uintptr(algo+1), uintptr(unsafe.Pointer(&res[0])), uintptr(unsafe.Pointer(np)))
	runtime.KeepAlive(res)
	runtime.KeepAlive(np)
	if err != nil {
		g.Destroy()
		return nil, err
	}
	n := *np
	if n >= 1 {
		g.algo = res[min(algo, int(n)-1)]
	}
	if n < 1 || g.algo.state != 0 {
		g.Destroy()
		return nil, fmt.Errorf("cublasLtMatmulAlgoGetHeuristic(M=%d N=%d K=%d): no algorithm (state %d)", M, N, K, g.algo.state)
	}
	g.Workspace = g.algo.workspaceSize
	return g, nil
}

// Run enqueues D = op(A)·op(B) on stream s.
func (g *Gemm) Run(a, b, d DevPtr, workspace DevPtr, wsSize uint64, s Stream) error {
	c := g.c
	r := c.ex.call(c.matmul, c.handle, g.desc, uintptr(unsafe.Pointer(&g.alpha)),
		uintptr(a), g.a, uintptr(b), g.b, uintptr(unsafe.Pointer(&g.beta)), uintptr(d), g.d, uintptr(d), g.d,
		uintptr(unsafe.Pointer(&g.algo.algo)), uintptr(workspace), uintptr(wsSize), uintptr(s))
	if st := status(r); st != 0 {
		return c.statusErr(fmt.Sprintf("cublasLtMatmul(M=%d N=%d K=%d)", g.M, g.N, g.K), st)
	}
	return nil
}

// Destroy frees the plan's descriptors.
func (g *Gemm) Destroy() {
	c := g.c
	for _, l := range []*uintptr{&g.a, &g.b, &g.d} {
		if *l != 0 {
			c.check("cublasLtMatrixLayoutDestroy", c.layoutDestroy, *l) //nolint:errcheck // cleanup
			*l = 0
		}
	}
	if g.desc != 0 {
		c.check("cublasLtMatmulDescDestroy", c.descDestroy, g.desc) //nolint:errcheck // cleanup
		g.desc = 0
	}
}
