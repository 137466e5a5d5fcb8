package cuda

import (
	"runtime"
	"sort"
	"time"

	"github.com/infernix/infernix/engine/backend"
)

var _ backend.BandwidthMeter = (*Backend)(nil)

// MeasureBandwidth times device-to-device copies of 1 GiB (median of 5
// after a warm-up) and counts the bytes read plus written: the same
// denominator as the decode roofline in tests/device/NOTES.md.
func (b *Backend) MeasureBandwidth() (float64, error) {
	const n = 1 << 30
	src, err := b.malloc(n, "bandwidth probe")
	if err != nil {
		return 0, err
	}
	defer b.free(src)
	dst, err := b.malloc(n, "bandwidth probe")
	if err != nil {
		return 0, err
	}
	defer b.free(dst)
	var ts []time.Duration
	for i := 0; i < 6; i++ {
		b.sync()
		t0 := time.Now()
		b.copyDtoD(dst, src, n)
		runtime.LockOSThread()
		b.sync()
		runtime.UnlockOSThread()
		if b.err != nil {
			return 0, b.err
		}
		if i > 0 {
			ts = append(ts, time.Since(t0))
		}
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
	return 2 * n / ts[len(ts)/2].Seconds(), nil
}
