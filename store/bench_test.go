package store

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/infernix/infernix/engine/prefix"
)

// benchSizes are block sizes: the demo model's KV block on the CPU (f32) and
// about a Qwen3-8B block on the GPU (36 layers × K,V × 64 tokens × 8 heads ×
// 128 × bf16 = 9 MiB).
var benchSizes = []struct {
	name string
	size int
}{{"512KiB", 512 << 10}, {"9MiB", 9 << 20}}

// noise is incompressible block content (KV values are).
func noise(n int, seed uint64) []byte {
	r := rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)})
	b := make([]byte, n)
	r.Read(b)
	return b
}

// BenchmarkPrefixSave and BenchmarkPrefixRestore report MB/s of block bytes
// through the store: Save queues, the background writer seals and writes;
// the benchmark waits for the queue when it is full and for the last write,
// so it measures the writer, not drops.
func BenchmarkPrefixSave(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			s := mustOpen(b, b.TempDir())
			defer s.Close()
			data := noise(bs.size, 7)
			p, err := s.Prefix([]byte("bench"), bs.size, 0)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(bs.size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if !p.Accepting() {
					p.Flush()
				}
				p.Save(prefix.BlockKey(prefix.Seed(), []int32{int32(i)}), data)
			}
			p.Flush()
			b.StopTimer()
			if st := p.Stats(); st.Dropped != 0 || st.Saved != uint64(b.N) {
				b.Fatalf("stats %+v after %d saves", st, b.N)
			}
			p.Close()
		})
	}
}

// BenchmarkPrefixRestore reads stored blocks back (checksum verified), as a
// cache hit after a restart does.
func BenchmarkPrefixRestore(b *testing.B) {
	for _, bs := range benchSizes {
		b.Run(bs.name, func(b *testing.B) {
			n := max(8, (64<<20)/bs.size) // 64 MiB of blocks at least
			s := mustOpen(b, b.TempDir())
			defer s.Close()
			p, err := s.Prefix([]byte("bench"), bs.size, 0)
			if err != nil {
				b.Fatal(err)
			}
			keys := make([]prefix.Key, n)
			for i := range keys {
				keys[i] = prefix.BlockKey(prefix.Seed(), []int32{int32(i)})
				if !p.Accepting() {
					p.Flush()
				}
				p.Save(keys[i], noise(bs.size, uint64(i)))
			}
			p.Close()
			dst := make([]byte, bs.size)
			b.SetBytes(int64(bs.size))
			for i := 0; b.Loop(); i++ {
				if err := p.Load(keys[i%n], dst); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPrefixOpen is the start-up cost of a stored prefix cache: loading
// the index (keys, sizes, scores) of 4096 blocks without their bytes.
func BenchmarkPrefixOpen(b *testing.B) {
	const size, n = 4096, 4096
	dir := b.TempDir()
	s := mustOpen(b, dir)
	defer s.Close()
	p, err := s.Prefix([]byte("bench"), size, 0)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if !p.Accepting() {
			p.Flush()
		}
		p.Save(prefix.BlockKey(prefix.Seed(), []int32{int32(i)}), block(size, byte(i)))
	}
	p.Close()
	var total time.Duration
	runs := 0
	for b.Loop() {
		start := time.Now()
		q, err := s.Prefix([]byte("bench"), size, 0)
		if err != nil {
			b.Fatal(err)
		}
		total += time.Since(start)
		runs++
		if q.Stats().Blocks != n {
			b.Fatalf("%d blocks indexed", q.Stats().Blocks)
		}
		q.Close()
	}
	b.ReportMetric(float64(n)/(total.Seconds()/float64(runs)), "entries/s")
}
