// Package state holds the per-sequence recurrent state of hybrid models
// (conv and gated-delta-rule state of every linear-attention layer) in pools
// of slots on the backend, and turns a slot into a portable snapshot and back.
//
// The scheduler gives each running sequence a slot (backend.AttnBatch.Slots);
// full-attention layers keep using the paged KV cache. A snapshot covers only
// the recurrent part: the KV blocks of the same prefix are shared through the
// block tables, so the prefix cache stores (blocks, snapshot) pairs.
package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"math"

	"github.com/infernix/infernix/engine/backend"
)

// Stateful is implemented by models that carry per-sequence recurrent state.
type Stateful interface {
	// StateSlots is the number of sequences that can be in flight at once.
	StateSlots() int
	// Snapshot encodes slot's state, which the caller asserts is the state
	// after exactly pos tokens of its sequence.
	Snapshot(slot, pos int) ([]byte, error)
	// Restore loads a snapshot into slot and returns its position: the next
	// token to run for that sequence is at that position.
	Restore(slot int, snap []byte) (pos int, err error)
}

// Version is the snapshot format version; Restore refuses others.
const Version = 1

const magic = "IXRS"

// header: magic, version, fingerprint, pos, layers, 4 dims; then data, crc32.
const headerSize = 4 + 4 + 8 + 8 + 5*4

// Pool is one state pool per linear layer, each with Slots slots.
type Pool struct {
	be          backend.Recurrent
	Slots       int
	Conv, Rec   []backend.Tensor // per layer: [Slots*ConvRows, ConvCols], [Slots*RecRows, RecCols]
	ConvRows    int
	ConvCols    int
	RecRows     int
	RecCols     int
	fingerprint uint64
	buf         []float32
}

// NewPool allocates zeroed pools for layers linear layers. be must implement
// backend.Recurrent.
func NewPool(be backend.Backend, slots, layers, convRows, convCols, recRows, recCols int, fingerprint uint64) (*Pool, error) {
	rec, ok := be.(backend.Recurrent)
	if !ok {
		return nil, fmt.Errorf("backend %s does not implement the recurrent-state operators hybrid (linear-attention) models need", be.Name())
	}
	if slots <= 0 {
		return nil, errors.New("state: need at least one slot")
	}
	p := &Pool{be: rec, Slots: slots, ConvRows: convRows, ConvCols: convCols, RecRows: recRows, RecCols: recCols, fingerprint: fingerprint}
	for i := 0; i < layers; i++ {
		p.Conv = append(p.Conv, be.Alloc(slots*convRows, convCols))
		p.Rec = append(p.Rec, be.Alloc(slots*recRows, recCols))
	}
	return p, nil
}

// Bytes is the size of one slot's state (and about a snapshot's size).
func (p *Pool) Bytes() int {
	return 4 * len(p.Conv) * (p.ConvRows*p.ConvCols + p.RecRows*p.RecCols)
}

// Snapshot implements Stateful.Snapshot for the pool.
func (p *Pool) Snapshot(slot, pos int) ([]byte, error) {
	if slot < 0 || slot >= p.Slots {
		return nil, fmt.Errorf("state: slot %d out of range [0,%d)", slot, p.Slots)
	}
	if pos < 0 {
		return nil, fmt.Errorf("state: negative position %d", pos)
	}
	out := make([]byte, headerSize, headerSize+p.Bytes()+4)
	copy(out, magic)
	le := binary.LittleEndian
	le.PutUint32(out[4:], Version)
	le.PutUint64(out[8:], p.fingerprint)
	le.PutUint64(out[16:], uint64(pos))
	for i, v := range []int{len(p.Conv), p.ConvRows, p.ConvCols, p.RecRows, p.RecCols} {
		le.PutUint32(out[24+4*i:], uint32(v))
	}
	for l := range p.Conv {
		out = p.appendRows(out, p.Conv[l], slot*p.ConvRows, p.ConvRows*p.ConvCols)
		out = p.appendRows(out, p.Rec[l], slot*p.RecRows, p.RecRows*p.RecCols)
	}
	return le.AppendUint32(out, crc32.ChecksumIEEE(out)), nil
}

func (p *Pool) appendRows(out []byte, t backend.Tensor, row, n int) []byte {
	p.buf = grow(p.buf, n)
	p.be.ReadStateRows(t, row, p.buf)
	for _, v := range p.buf {
		out = binary.LittleEndian.AppendUint32(out, math.Float32bits(v))
	}
	return out
}

// Restore implements Stateful.Restore for the pool; a snapshot of another
// model, format version or layout, or a damaged one, is an error and leaves
// the slot untouched.
func (p *Pool) Restore(slot int, snap []byte) (int, error) {
	if slot < 0 || slot >= p.Slots {
		return 0, fmt.Errorf("state: slot %d out of range [0,%d)", slot, p.Slots)
	}
	pos, err := p.check(snap)
	if err != nil {
		return 0, err
	}
	data := snap[headerSize : len(snap)-4]
	for l := range p.Conv {
		data = p.writeRows(data, p.Conv[l], slot*p.ConvRows, p.ConvRows*p.ConvCols)
		data = p.writeRows(data, p.Rec[l], slot*p.RecRows, p.RecRows*p.RecCols)
	}
	return pos, nil
}

func (p *Pool) check(snap []byte) (int, error) {
	le := binary.LittleEndian
	if len(snap) < headerSize+4 || string(snap[:4]) != magic {
		return 0, errors.New("state: not a recurrent-state snapshot")
	}
	if v := le.Uint32(snap[4:]); v != Version {
		return 0, fmt.Errorf("state: snapshot format version %d, this build reads %d", v, Version)
	}
	if fp := le.Uint64(snap[8:]); fp != p.fingerprint {
		return 0, fmt.Errorf("state: snapshot of another model (fingerprint %016x, this model %016x)", fp, p.fingerprint)
	}
	for i, v := range []int{len(p.Conv), p.ConvRows, p.ConvCols, p.RecRows, p.RecCols} {
		if int(le.Uint32(snap[24+4*i:])) != v {
			return 0, errors.New("state: snapshot layout differs from the model's")
		}
	}
	if len(snap) != headerSize+p.Bytes()+4 {
		return 0, fmt.Errorf("state: snapshot is %d bytes, expected %d", len(snap), headerSize+p.Bytes()+4)
	}
	if crc32.ChecksumIEEE(snap[:len(snap)-4]) != le.Uint32(snap[len(snap)-4:]) {
		return 0, errors.New("state: snapshot checksum mismatch (damaged)")
	}
	pos := le.Uint64(snap[16:])
	if pos > math.MaxInt32 {
		return 0, fmt.Errorf("state: snapshot position %d out of range", pos)
	}
	return int(pos), nil
}

func (p *Pool) writeRows(data []byte, t backend.Tensor, row, n int) []byte {
	p.buf = grow(p.buf, n)
	for i := range p.buf {
		p.buf[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	p.be.WriteStateRows(t, row, p.buf)
	return data[4*n:]
}

// Fingerprint hashes whatever identifies a model's state layout and weights
// (architecture, shapes, a weights digest) into the value snapshots carry.
func Fingerprint(parts ...any) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		fmt.Fprintf(h, "%v\x00", p)
	}
	return h.Sum64()
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}
