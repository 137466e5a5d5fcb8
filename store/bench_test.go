package store

import (
	"testing"

	"github.com/infernix/infernix/engine/prefix"
)

// BenchmarkPrefixSave and BenchmarkPrefixRestore report MB/s of block bytes
// (1 MiB blocks, a mid-size model's KV block).
func BenchmarkPrefixSave(b *testing.B) {
	const size = 1 << 20
	s := mustOpen(b, b.TempDir())
	defer s.Close()
	data := block(size, 7)
	b.SetBytes(size)
	p, err := s.Prefix([]byte("bench"), size, 0)
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; b.Loop(); i++ {
		p.Save(prefix.BlockKey(prefix.Seed(), []int32{int32(i)}), data)
		for len(p.queue) == cap(p.queue) {
			// Measure the writer, not drops: wait for room.
		}
	}
	p.Close()
}

func BenchmarkPrefixRestore(b *testing.B) {
	const size, n = 1 << 20, 64
	s := mustOpen(b, b.TempDir())
	defer s.Close()
	p, err := s.Prefix([]byte("bench"), size, 0)
	if err != nil {
		b.Fatal(err)
	}
	keys := make([]prefix.Key, n)
	for i := range keys {
		keys[i] = prefix.BlockKey(prefix.Seed(), []int32{int32(i)})
		p.Save(keys[i], block(size, byte(i)))
		for len(p.queue) > 0 {
		}
	}
	p.Close()
	dst := make([]byte, size)
	b.SetBytes(size)
	for i := 0; b.Loop(); i++ {
		if err := p.Load(keys[i%n], dst); err != nil {
			b.Fatal(err)
		}
	}
}
