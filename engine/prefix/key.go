package prefix

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// Key names one cached block by content: it commits to every token before
// and in the block, and to the seed's extra keys (model fingerprint, adapter,
// cache salt). 128 bits of SHA-256: collisions are not a practical concern,
// and a wrong hit would silently serve another prompt's KV.
type Key [16]byte

// String is the key in hex (logs, store keys).
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// Seed is the root key that a sequence's first block chains from. Each extra
// part is length-prefixed so that ("ab","c") and ("a","bc") differ.
func Seed(extra ...[]byte) Key {
	h := sha256.New()
	h.Write([]byte("infernix-prefix-v1"))
	var n [8]byte
	for _, e := range extra {
		binary.LittleEndian.PutUint64(n[:], uint64(len(e)))
		h.Write(n[:])
		h.Write(e)
	}
	var k Key
	copy(k[:], h.Sum(nil))
	return k
}

// BlockKey is the key of a block of len(toks) (normally BlockSize) tokens
// following the block named parent. It does not allocate.
func BlockKey(parent Key, toks []int32) Key {
	var buf [16 + 4*BlockSize]byte
	copy(buf[:16], parent[:])
	n := 16
	for _, t := range toks {
		if n+4 > len(buf) {
			break // callers pass at most BlockSize tokens
		}
		binary.LittleEndian.PutUint32(buf[n:], uint32(t))
		n += 4
	}
	sum := sha256.Sum256(buf[:n])
	var k Key
	copy(k[:], sum[:16])
	return k
}
