package server

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKeySet(t *testing.T) {
	ks := newKeySet([]string{"alpha", " beta ", ""})
	for key, want := range map[string]bool{"alpha": true, "beta": true, "": false, "alph": false, "alphaa": false, "ALPHA": false} {
		if ks.valid(key) != want {
			t.Errorf("valid(%q) = %v", key, !want)
		}
	}
	if !newKeySet(nil).empty() || !newKeySet([]string{" "}).empty() || ks.empty() {
		t.Error("empty()")
	}
}

func TestReadKeysFile(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "keys")
	os.WriteFile(p, []byte("# comment\n\n key1 \nkey2\n"), 0o600)
	keys, err := ReadKeysFile(p)
	if err != nil || len(keys) != 2 || keys[0] != "key1" || keys[1] != "key2" {
		t.Errorf("%v %v", keys, err)
	}
	os.WriteFile(p, []byte("# only a comment\n"), 0o600)
	if _, err := ReadKeysFile(p); err == nil {
		t.Error("a file without keys must be an error")
	}
	if _, err := ReadKeysFile(filepath.Join(dir, "missing")); err == nil {
		t.Error("a missing file must be an error")
	}
}
