package overlaymount

import "path/filepath"

// Name is the overlay transport's name.
const Name = "overlay"

// CacheDir is where a home's layer cache lives inside the runtime dir
// of its runs.
func CacheDir(runDir string) string { return filepath.Join(runDir, "layers") }
