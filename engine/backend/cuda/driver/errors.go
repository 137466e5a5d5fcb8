package driver

import (
	"fmt"
	"unsafe"
)

// Error is a failed library call: the call's name and the status it returned.
type Error struct {
	Call string // e.g. "cuLaunchKernel(rmsnorm_block)"
	Code int
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Msg  string
}

func (e *Error) Error() string {
	if e.Msg != "" && e.Msg != e.Name {
		return fmt.Sprintf("%s: %s (%d): %s", e.Call, e.Name, e.Code, e.Msg)
	}
	return fmt.Sprintf("%s: %s (%d)", e.Call, e.Name, e.Code)
}

// CUDA driver result codes the backend reacts to.
const (
	ErrOutOfMemory = 2
	ErrNotReady    = 600
	ErrNoDevice    = 100
)

// status keeps the low 32 bits of a C enum return value: the upper half of
// the return register is undefined for a 32-bit result.
func status(r uintptr) int { return int(int32(uint32(r))) }

// cString reads a NUL-terminated C string (nil pointer: "").
func cString(p uintptr) string {
	if p == 0 {
		return ""
	}
	ptr := *(*unsafe.Pointer)(unsafe.Pointer(&p))
	n := 0
	for *(*byte)(unsafe.Add(ptr, n)) != 0 {
		n++
		if n > 1<<16 {
			break
		}
	}
	return string(unsafe.Slice((*byte)(ptr), n))
}

// cstr returns s as a NUL-terminated byte slice.
func cstr(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}

// cstrArray returns C strings and an array of pointers to them; keep both
// alive across the call.
func cstrArray(ss []string) ([][]byte, []unsafe.Pointer) {
	bufs := make([][]byte, len(ss))
	ptrs := make([]unsafe.Pointer, len(ss)+1)
	for i, s := range ss {
		bufs[i] = cstr(s)
		ptrs[i] = unsafe.Pointer(&bufs[i][0])
	}
	return bufs, ptrs
}
