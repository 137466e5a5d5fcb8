package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// WriteTensor is one tensor to write.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []byte
}

// Encode returns a safetensors image of the tensors (sorted by name, header
// padded to 8 bytes as the reference writer does).
func Encode(tensors []WriteTensor, metadata map[string]string) ([]byte, error) {
	sorted := append([]WriteTensor(nil), tensors...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	header := map[string]any{}
	if len(metadata) > 0 {
		header["__metadata__"] = metadata
	}
	var off int64
	for _, t := range sorted {
		n := int64(t.DType.Size())
		for _, d := range t.Shape {
			n *= int64(d)
		}
		if n != int64(len(t.Data)) {
			return nil, fmt.Errorf("tensor %q: %d bytes for %s%v", t.Name, len(t.Data), t.DType, t.Shape)
		}
		header[t.Name] = headerEntry{DType: t.DType, Shape: append([]int{}, t.Shape...), DataOffsets: []int64{off, off + n}}
		off += n
	}
	h, err := json.Marshal(header)
	if err != nil {
		return nil, err
	}
	for len(h)%8 != 0 {
		h = append(h, ' ')
	}
	out := make([]byte, 8, 8+len(h)+int(off))
	binary.LittleEndian.PutUint64(out, uint64(len(h)))
	out = append(out, h...)
	for _, t := range sorted {
		out = append(out, t.Data...)
	}
	return out, nil
}

// WriteFile writes tensors to path.
func WriteFile(path string, tensors []WriteTensor, metadata map[string]string) error {
	b, err := Encode(tensors, metadata)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
