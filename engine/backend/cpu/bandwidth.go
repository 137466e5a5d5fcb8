package cpu

import (
	"sync"
	"time"

	"github.com/infernix/infernix/engine/backend"
)

// MemoryBandwidth measures streaming read bandwidth in bytes/s with the
// backend's own fastest read kernel (the F32 dot product), over a 512 MiB
// buffer split across threads, best of three passes. It is the denominator of
// the decode roofline: decode reads every weight once per token.
func MemoryBandwidth(threads int) float64 {
	if threads <= 0 {
		threads = 1
	}
	buf := make([]float32, 128<<20)
	for i := range buf {
		buf[i] = float32(i & 1023)
	}
	var sink float32
	best := 0.0
	chunk := len(buf) / threads
	for pass := 0; pass < 3; pass++ {
		sums := make([]float32, threads)
		var wg sync.WaitGroup
		start := time.Now()
		for w := 0; w < threads; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				part := buf[w*chunk : (w+1)*chunk]
				sums[w] = dot(part, part) // one load per element: both operands hit the same line
			}(w)
		}
		wg.Wait()
		bw := float64(chunk*threads*4) / time.Since(start).Seconds()
		best = max(best, bw)
		for _, s := range sums {
			sink += s
		}
	}
	if sink == -1 {
		println()
	}
	return best
}

var _ backend.BandwidthMeter = (*Backend)(nil)

// MeasureBandwidth is MemoryBandwidth with the backend's threads.
func (b *Backend) MeasureBandwidth() (float64, error) { return MemoryBandwidth(b.workers), nil }
