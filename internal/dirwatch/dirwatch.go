// Package dirwatch notices changes to a directory's script files by polling
// their names, sizes and modification times: portable, and cheap for the few
// files a scripts or plugins directory holds.
package dirwatch

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"
)

// Signature summarises the files under dir whose names end in ext (in sub-
// directories too when recursive); it changes when any of them is added,
// removed, resized or touched.
func Signature(dir, ext string, recursive bool) string {
	var b strings.Builder
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if path != dir && !recursive {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ext) {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			fmt.Fprintf(&b, "%s %d %d\n", path, fi.Size(), fi.ModTime().UnixNano())
		}
		return nil
	})
	return b.String()
}

// Poll calls reload every interval when changed reports a change, until ctx
// ends.
func Poll(ctx context.Context, interval time.Duration, changed func() bool, reload func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if changed() {
			reload()
		}
	}
}
