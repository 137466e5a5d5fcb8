package cuda

import (
	"fmt"
	"os"
	"testing"

	"github.com/infernix/infernix/engine/backend"
)

// readPeakVariants are kernels/probe.cu's read_peak builds TestReadPeak
// times (compiled everywhere by TestKernelsCompile).
var readPeakVariants = []struct {
	name string
	defs []string
}{
	{"u4", nil},
	{"u2", []string{"RP_U=2"}},
	{"u8", []string{"RP_U=8"}},
	{"u4_ws", []string{"RP_WS=1"}},
	{"u8_ws", []string{"RP_U=8", "RP_WS=1"}},
	{"u4_plain", []string{"RP_LD=1"}},
	{"u4_l2pf128", []string{"LD_L2PF=128"}},
	{"u4_l2pf256", []string{"LD_L2PF=256"}},
	{"u8_ws_l2pf256", []string{"RP_U=8", "RP_WS=1", "LD_L2PF=256"}},
}

// TestReadPeak (INFERNIX_BENCH_READPEAK=1, run.sh group readpeak) times
// how fast this GPU's memory reads: every read_peak variant over 4 GiB
// at 2, 4 and 8 blocks of 256 threads a SM, the device-to-device copy the
// bench's roofline divides by, and the engine's fused decode product
// (gemvf, as the process's INFERNIX_CUDA_DEFINES build it) over the same
// bytes as a [524288, 4096] bf16 matrix, whose every output it checks.
func TestReadPeak(t *testing.T) {
	if os.Getenv("INFERNIX_BENCH_READPEAK") == "" {
		t.Skip("set INFERNIX_BENCH_READPEAK=1")
	}
	b := gpu(t)
	alloc, release := devAllocs(t, b, "read peak")
	defer release()
	const n = 4 << 30
	const cols = 4096
	const rows = n / (2 * cols)
	buf := alloc(n)
	b.memset(buf, 0x3f803f80, n/4) // bf16 1.0 everywhere
	x := alloc(4 * cols)
	b.memset(x, 0x3f800000, cols) // f32 1.0
	out := alloc(4 * rows)
	b.memset(out, 0x7fc00000, rows)
	word := alloc(4)
	b.memset(word, 0, 1)
	res := map[string]any{"device": b.Name(), "bytes": n}
	report := func(name string, bytes int64, us float64) {
		gbs := float64(bytes) / us / 1e3
		res[name+"_GBps"] = gbs
		fmt.Printf("read peak %-28s %9.1f µs  %6.0f GB/s\n", name, us, gbs)
	}
	for _, v := range readPeakVariants {
		var k *kernel
		if err := b.load("probe.cu", v.defs, map[string]**kernel{"read_peak": &k}); err != nil {
			t.Fatalf("%s: %v", v.name, err)
		}
		for _, bps := range []int{2, 4, 8} {
			d := graphTime(t, b, func() {
				b.launch(k, uint32(bps*b.smCount), 1, 1, 256, 1, 0, ptr(buf), uint64(n/16), ptr(word))
			})
			report(fmt.Sprintf("%s_b%d", v.name, bps), n, float64(d.Nanoseconds())/1e3)
		}
	}
	if got := readF32(t, b, word, 1)[0]; got != 0 {
		t.Errorf("read_peak wrote its word (%v): the fold of equal words must be 0", got)
	}
	copyBps, err := b.MeasureBandwidth()
	if err != nil {
		t.Fatal(err)
	}
	res["copy_GBps"] = copyBps / 1e9
	fmt.Printf("read peak %-28s %27.0f GB/s (read + written)\n", "copy", copyBps/1e9)
	w := &Tensor{ptr: buf, rows: rows, cols: cols, dt: backend.BF16}
	d := graphTime(t, b, func() {
		q := pending{kind: pendGemv, n: 1, x: x, T: 1, I: cols, epi: epiNone}
		q.jobs[0] = gemvJob{out, w, rows}
		b.launchGemvf(&q)
	})
	report("gemvf", n, float64(d.Nanoseconds())/1e3)
	for i, y := range readF32(t, b, out, rows) {
		if y != cols {
			t.Fatalf("gemvf output %d = %v, want %d", i, y, cols)
		}
	}
	writeBenchJSON(t, res)
}
