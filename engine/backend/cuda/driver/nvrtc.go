package driver

import (
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// NVRTC is the opened runtime compiler.
type NVRTC struct {
	lib          *library
	Major, Minor int
	archs        []int // supported SM versions (e.g. 90); nil if the library cannot say

	create, destroy, compile, logSize, log, cubinSize, cubin, ptxSize, ptx, errStr uintptr
}

// LoadNVRTC opens libnvrtc (any of the CUDA 11.2+ sonames; its builtins
// library is preloaded from the same directory).
func LoadNVRTC() (*NVRTC, error) {
	lib, err := open("libnvrtc",
		[]string{"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2"},
		[]string{"libnvrtc.so.1[1-9]*", "libnvrtc.so"},
		[]string{"libnvrtc-builtins.so.*"})
	if err != nil {
		return nil, notAvailable(err)
	}
	n := &NVRTC{lib: lib}
	var version uintptr
	if err := lib.syms(map[string]*uintptr{
		"nvrtcVersion": &version, "nvrtcCreateProgram": &n.create, "nvrtcDestroyProgram": &n.destroy,
		"nvrtcCompileProgram": &n.compile, "nvrtcGetProgramLogSize": &n.logSize, "nvrtcGetProgramLog": &n.log,
		"nvrtcGetPTXSize": &n.ptxSize, "nvrtcGetPTX": &n.ptx, "nvrtcGetErrorString": &n.errStr,
	}); err != nil {
		return nil, notAvailable(err)
	}
	n.cubinSize = lib.optSym("nvrtcGetCUBINSize")
	n.cubin = lib.optSym("nvrtcGetCUBIN")
	var major, minor int32
	if err := n.check("nvrtcVersion", version, uintptr(unsafe.Pointer(&major)), uintptr(unsafe.Pointer(&minor))); err != nil {
		return nil, notAvailable(err)
	}
	n.Major, n.Minor = int(major), int(minor)
	if num, list := lib.optSym("nvrtcGetNumSupportedArchs"), lib.optSym("nvrtcGetSupportedArchs"); num != 0 && list != 0 {
		var cnt int32
		if n.check("nvrtcGetNumSupportedArchs", num, uintptr(unsafe.Pointer(&cnt))) == nil && cnt > 0 && cnt < 1000 {
			a := make([]int32, cnt)
			if n.check("nvrtcGetSupportedArchs", list, uintptr(unsafe.Pointer(&a[0]))) == nil {
				for _, v := range a {
					n.archs = append(n.archs, int(v))
				}
			}
		}
	}
	return n, nil
}

// Path is the library file that was opened.
func (n *NVRTC) Path() string { return n.lib.path }

// Version is "major.minor".
func (n *NVRTC) Version() string { return fmt.Sprintf("%d.%d", n.Major, n.Minor) }

// Target picks what to compile for a device of compute capability sm (e.g.
// 90): cubin for sm itself when this NVRTC supports it, otherwise PTX for the
// newest virtual architecture it supports below sm (the driver then compiles
// the PTX). arch is the value for --gpu-architecture.
func (n *NVRTC) Target(sm int) (arch string, cubin bool) {
	if n.cubin != 0 && n.cubinSize != 0 && (n.archs == nil || contains(n.archs, sm)) {
		return fmt.Sprintf("sm_%d", sm), true
	}
	best := 0
	for _, a := range n.archs {
		if a <= sm && a > best {
			best = a
		}
	}
	if best == 0 {
		best = sm
	}
	return fmt.Sprintf("compute_%d", best), false
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// check calls fn. Its pointer arguments (uintptr(unsafe.Pointer(&x)) in the
// call) stay on the heap and alive until it returns (go:uintptrescapes);
// a pointer converted to uintptr before the call is not kept alive.
//
//go:uintptrescapes
func (n *NVRTC) check(call string, fn uintptr, args ...uintptr) error {
	r, _, _ := purego.SyscallN(fn, args...)
	if c := status(r); c != 0 {
		e := &Error{Call: call, Code: c, Name: fmt.Sprintf("nvrtcResult %d", c)}
		if n.errStr != 0 {
			p, _, _ := purego.SyscallN(n.errStr, uintptr(c))
			if s := cString(p); s != "" {
				e.Name = s
			}
		}
		return e
	}
	return nil
}

// Compile compiles CUDA C++ source. It returns the image (cubin, or
// NUL-terminated PTX when cubin is false) and the compiler's log; a failed
// compilation's error carries the log.
func (n *NVRTC) Compile(src, name string, opts []string, cubin bool) (image []byte, log string, err error) {
	csrc, cname := cstr(src), cstr(name)
	var prog uintptr
	if err := n.check("nvrtcCreateProgram("+name+")", n.create, uintptr(unsafe.Pointer(&prog)),
		uintptr(unsafe.Pointer(&csrc[0])), uintptr(unsafe.Pointer(&cname[0])), 0, 0, 0); err != nil {
		return nil, "", err
	}
	defer n.check("nvrtcDestroyProgram", n.destroy, uintptr(unsafe.Pointer(&prog))) //nolint:errcheck // cleanup
	// ptrs has a terminating nil, so &ptrs[0] exists with no options too.
	// It is converted in the call itself: computed before it, the array
	// (and the option strings it points to) could be collected while
	// NVRTC reads them (run 13's local compile test failed so, at random,
	// with NVRTC_ERROR_INVALID_PROGRAM).
	bufs, ptrs := cstrArray(opts)
	cerr := n.check("nvrtcCompileProgram("+name+")", n.compile, prog, uintptr(len(opts)), uintptr(unsafe.Pointer(&ptrs[0])))
	runtime.KeepAlive(bufs)
	runtime.KeepAlive(ptrs)
	var size uint64
	if n.check("nvrtcGetProgramLogSize", n.logSize, prog, uintptr(unsafe.Pointer(&size))) == nil && size > 1 {
		b := make([]byte, size)
		if n.check("nvrtcGetProgramLog", n.log, prog, uintptr(unsafe.Pointer(&b[0]))) == nil {
			log = strings.TrimRight(string(b), "\x00\n ")
		}
	}
	if cerr != nil {
		return nil, log, fmt.Errorf("%w\n%s", cerr, log)
	}
	sizeFn, getFn, what := n.ptxSize, n.ptx, "PTX"
	if cubin {
		sizeFn, getFn, what = n.cubinSize, n.cubin, "CUBIN"
	}
	size = 0
	if err := n.check("nvrtcGet"+what+"Size", sizeFn, prog, uintptr(unsafe.Pointer(&size))); err != nil {
		return nil, log, err
	}
	image = make([]byte, size)
	if size > 0 {
		if err := n.check("nvrtcGet"+what, getFn, prog, uintptr(unsafe.Pointer(&image[0]))); err != nil {
			return nil, log, err
		}
	}
	return image, log, nil
}
