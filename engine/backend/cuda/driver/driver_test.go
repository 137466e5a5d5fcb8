package driver

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"
)

// TestNVRTCCompile compiles a kernel to a cubin for sm_90 (and PTX) where
// NVRTC is installed; NVRTC needs no GPU, so this runs on any machine with
// the library and skips elsewhere.
func TestNVRTCCompile(t *testing.T) {
	n, err := LoadNVRTC()
	if err != nil {
		if errors.Is(err, ErrNotAvailable) {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	t.Logf("NVRTC %s from %s, archs %v", n.Version(), n.Path(), n.archs)
	src := `extern "C" __global__ void axpy(float* y, const float* x, float a, int n) {
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n) y[i] += a * x[i];
}`
	arch, cubin := n.Target(90)
	img, log, err := n.Compile(src, "axpy.cu", []string{"--gpu-architecture=" + arch}, cubin)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	if cubin && !bytes.HasPrefix(img, []byte("\x7fELF")) {
		t.Fatalf("cubin is not an ELF image (%d bytes, log %q)", len(img), log)
	}
	if !cubin && !bytes.Contains(img, []byte(".entry axpy")) {
		t.Fatalf("PTX lacks the kernel entry")
	}
	// A syntax error is reported with the compiler's log.
	_, _, err = n.Compile("extern \"C\" __global__ void bad( {", "bad.cu", []string{"--gpu-architecture=" + arch}, cubin)
	if err == nil || !bytes.Contains([]byte(err.Error()), []byte("bad.cu")) {
		t.Fatalf("expected a compile error naming bad.cu, got %v", err)
	}
}

// TestDriverUnavailable checks that a machine without libcuda reports
// ErrNotAvailable rather than failing otherwise.
func TestDriverUnavailable(t *testing.T) {
	d, err := LoadDriver()
	if err == nil {
		t.Skipf("libcuda present (%s, CUDA %d)", d.Path(), d.Version())
	}
	if !errors.Is(err, ErrNotAvailable) {
		t.Fatalf("want ErrNotAvailable, got %v", err)
	}
}

// TestLaunchConfigLayout pins the Go mirrors of CUlaunchConfig and
// CUlaunchAttribute to cuda.h's layout (x86-64 and arm64).
func TestLaunchConfigLayout(t *testing.T) {
	var c launchConfig
	if s, st, at, n := unsafe.Sizeof(c), unsafe.Offsetof(c.stream), unsafe.Offsetof(c.attrs), unsafe.Offsetof(c.numAttrs); s != 56 || st != 32 || at != 40 || n != 48 {
		t.Errorf("launchConfig: size %d, stream at %d, attrs at %d, numAttrs at %d; want 56, 32, 40, 48", s, st, at, n)
	}
	var a launchAttr
	if s, v := unsafe.Sizeof(a), unsafe.Offsetof(a.val); s != 72 || v != 8 {
		t.Errorf("launchAttr: size %d, value at %d; want 72, 8", s, v)
	}
}

// TestClusterConfig: a cluster launch's attributes as cuda.h lays them out:
// CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (4) with x, y, z as three unsigned
// ints, then, with PDL, programmatic stream serialization (6) set to 1.
func TestClusterConfig(t *testing.T) {
	for _, pdl := range []bool{false, true} {
		var attrs [2]launchAttr
		c := clusterConfig(&attrs, 8, 2, 16, 128, 1, 1, 4096, 0, 16, pdl)
		if c.gridX != 8 || c.gridY != 2 || c.gridZ != 16 || c.blockX != 128 || c.smem != 4096 {
			t.Errorf("pdl %v: config %+v", pdl, *c)
		}
		if c.attrs != uintptr(unsafe.Pointer(&attrs[0])) {
			t.Errorf("pdl %v: attrs point elsewhere", pdl)
		}
		dims := [3]uint32{binary.LittleEndian.Uint32(attrs[0].val[0:]), binary.LittleEndian.Uint32(attrs[0].val[4:]), binary.LittleEndian.Uint32(attrs[0].val[8:])}
		if attrs[0].id != 4 || dims != [3]uint32{1, 1, 16} {
			t.Errorf("pdl %v: first attribute %d %v, want 4 [1 1 16]", pdl, attrs[0].id, dims)
		}
		want := uint32(1)
		if pdl {
			want = 2
			if attrs[1].id != 6 || attrs[1].val[0] != 1 {
				t.Errorf("second attribute %d value %d, want 6 1", attrs[1].id, attrs[1].val[0])
			}
		}
		if c.numAttrs != want {
			t.Errorf("pdl %v: %d attributes, want %d", pdl, c.numAttrs, want)
		}
	}
}

func TestStatusMasksUpperBits(t *testing.T) {
	for _, c := range []struct {
		in   uintptr
		want int
	}{{0, 0}, {0xdeadbeef00000000, 0}, {0xffffffff00000002, 2}, {0x00000000ffffffff, -1}} {
		if got := status(c.in); got != c.want {
			t.Errorf("status(%#x) = %d, want %d", c.in, got, c.want)
		}
	}
}
