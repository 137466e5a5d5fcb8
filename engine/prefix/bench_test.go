package prefix

import (
	"runtime"
	"testing"

	"github.com/infernix/infernix/engine/kv"
)

// BenchmarkIndexMemory reports the host memory the index spends per cached
// block (the KV bytes themselves live in the device pool), and the time to
// register one.
func BenchmarkIndexMemory(b *testing.B) {
	const n = 20000
	toks := toks(n*BlockSize, 1)
	var before, after runtime.MemStats
	for b.Loop() {
		a := kv.New(n)
		runtime.GC()
		runtime.ReadMemStats(&before)
		c := New(a)
		blocks, _ := a.Alloc(nil, n)
		key := Seed()
		for i := 0; i < n; i++ {
			key, _ = c.Register(key, i == 0, toks[i*BlockSize:(i+1)*BlockSize], blocks[i])
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "B/block")
		runtime.KeepAlive(c)
	}
}

// BenchmarkHostPoolMemory reports the host pool's bookkeeping per block
// beyond the block's own bytes, and the time of a Save.
func BenchmarkHostPoolMemory(b *testing.B) {
	const n, size = 20000, 256
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = BlockKey(Seed(), []int32{int32(i)})
	}
	data := make([]byte, size)
	var before, after runtime.MemStats
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		h := NewHostPool(n * size)
		for _, k := range keys {
			h.Save(k, data)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n-size, "overhead-B/block")
		runtime.KeepAlive(h)
	}
}
