package safetensors

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func sample() []WriteTensor {
	return []WriteTensor{
		{Name: "a", DType: F32, Shape: []int{2, 3}, Data: make([]byte, 24)},
		{Name: "b", DType: BF16, Shape: []int{5}, Data: []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{Name: "scalar", DType: F16, Shape: []int{}, Data: []byte{0, 60}},
	}
}

func TestRoundTrip(t *testing.T) {
	img, err := Encode(sample(), map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := Parse("x.safetensors", img)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 3 || f.Metadata["format"] != "pt" {
		t.Fatalf("got %d tensors, metadata %v", len(f.Tensors), f.Metadata)
	}
	b := f.Tensors["b"]
	if b.DType != BF16 || b.Elems() != 5 || b.Data[9] != 10 {
		t.Fatalf("tensor b: %+v", b)
	}
}

func TestMalformed(t *testing.T) {
	good, _ := Encode(sample(), nil)
	hlen := binary.LittleEndian.Uint64(good)
	withHeader := func(h string) []byte {
		out := make([]byte, 8)
		binary.LittleEndian.PutUint64(out, uint64(len(h)))
		return append(append(out, h...), make([]byte, 16)...)
	}
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"huge header length", append([]byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0}, good[8:]...), "exceeds the file"},
		{"truncated data", good[:len(good)-4], "outside"},
		{"truncated header", good[:8+hlen/2], "exceeds the file"},
		{"bad json", withHeader("{not json"), "bad header JSON"},
		{"unknown dtype", withHeader(`{"w":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}}`), `tensor "w": unknown dtype "Q4"`},
		{"size mismatch", withHeader(`{"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`), `tensor "w": 8 bytes for F32[3], expected 12`},
		{"negative offset", withHeader(`{"w":{"dtype":"U8","shape":[2],"data_offsets":[-2,0]}}`), "outside"},
		{"bad shape", withHeader(`{"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,0]}}`), "bad shape"},
		{"offsets count", withHeader(`{"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}}`), "2 values"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("m.safetensors", c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "m.safetensors") {
				t.Fatalf("got %v, want an error naming the file and containing %q", err, c.want)
			}
		})
	}
}

func TestOpenDirSharded(t *testing.T) {
	dir := t.TempDir()
	ts := sample()
	if err := WriteFile(filepath.Join(dir, "model-00001-of-00002.safetensors"), ts[:1], nil); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "model-00002-of-00002.safetensors"), ts[1:], nil); err != nil {
		t.Fatal(err)
	}
	index := `{"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors","scalar":"model-00002-of-00002.safetensors"}}`
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(index), 0o644)
	s, err := OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Get("a") == nil || s.Get("b") == nil || len(s.Names()) != 3 || s.Bytes() != 36 {
		t.Fatalf("names %v bytes %d", s.Names(), s.Bytes())
	}
	// An index naming a tensor the shard lacks.
	os.WriteFile(filepath.Join(dir, "model.safetensors.index.json"), []byte(strings.Replace(index, `"scalar"`, `"missing"`, 1)), 0o644)
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), `"missing"`) {
		t.Fatalf("got %v, want an error naming the missing tensor", err)
	}
	// A shard missing from disk.
	os.Remove(filepath.Join(dir, "model-00002-of-00002.safetensors"))
	if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "00002") {
		t.Fatalf("got %v, want an error naming the missing shard", err)
	}
	if _, err := OpenDir(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no *.safetensors") {
		t.Fatalf("empty dir: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	good, _ := Encode(sample(), nil)
	f.Add(good)
	f.Add([]byte{})
	f.Add(good[:20])
	f.Fuzz(func(t *testing.T, data []byte) {
		fl, err := Parse("fuzz", data)
		if err != nil {
			return
		}
		for _, ts := range fl.Tensors {
			if len(ts.Data) != ts.Elems()*ts.DType.Size() {
				t.Fatalf("tensor %q: %d bytes for %v", ts.Name, len(ts.Data), ts.Shape)
			}
		}
	})
}
