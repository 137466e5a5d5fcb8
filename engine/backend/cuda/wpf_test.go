package cuda

import (
	"testing"

	"github.com/infernix/infernix/engine/backend"
	"github.com/infernix/infernix/engine/backend/cuda/driver"
)

// TestPrefetchForHeldLaunch checks the host side of the decode attention's
// L2 prefetch (ATTN_WPF in kernels/attention.cu): a held attention launch
// receives the weights of the product that reads its output, in the slots
// its kernel declares (a pointer, and a count of 128-byte lines in a whole
// slot or in the high half of one, as struct DecodePrepP packs it), and
// nothing else: a product of other activations leaves it untouched. Runs
// without a GPU; the
// kernels' side is checked on the device (the model and attention groups
// run with it on, TestFusedLayer without it).
func TestPrefetchForHeldLaunch(t *testing.T) {
	const out, other = driver.DevPtr(0x10000), driver.DevPtr(0x20000)
	w := &Tensor{ptr: 0x7000000, rows: 4096, cols: 4096, dt: backend.BF16}
	lines := uint64(4096 * 4096 * 2 / 128)
	for _, c := range []struct {
		name                   string
		ptrSlot, linesSlot     int
		hiHalf                 bool
		x                      driver.DevPtr
		wantPtr, wantLinesSlot uint64
	}{
		{"prep struct", 19, 18, true, out, uint64(w.ptr), 0x3f800000 | lines<<32},
		{"plain args", 13, 14, false, out, uint64(w.ptr), lines},
		{"other activations", 13, 14, false, other, 0, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := &Backend{fuse: true, fz: fuseParts{wpf: true}}
			args := make([]uint64, 20)
			if c.hiHalf {
				args[c.linesSlot] = 0x3f800000 // a float in the low half (keps) must survive
			}
			b.holdLaunch(&kernel{name: "attn"}, 8, 1, 64, 128, 1024, out, c.ptrSlot, c.linesSlot, c.hiHalf, args...)
			if b.pend.kind != pendLaunch {
				t.Fatalf("the launch is not held (pending kind %d)", b.pend.kind)
			}
			b.prefetchFor(c.x, w)
			got := b.pend.held.args
			if got[c.ptrSlot] != c.wantPtr || got[c.linesSlot] != c.wantLinesSlot {
				t.Errorf("slots %d, %d = %#x, %#x; want %#x, %#x", c.ptrSlot, c.linesSlot, got[c.ptrSlot], got[c.linesSlot],
					c.wantPtr, c.wantLinesSlot)
			}
			if g := b.pend.held.grid; g != [3]uint32{8, 1, 64} || b.pend.held.smem != 1024 || b.pend.held.nargs != 20 {
				t.Errorf("held launch grid %v smem %d args %d", g, b.pend.held.smem, b.pend.held.nargs)
			}
		})
	}
}
