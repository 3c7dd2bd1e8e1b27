// Command genmanifest writes docs/commands.json, the manifest of the avfs
// command tree (commands, flags, positional arguments, output schemas)
// that the TypeScript and Python clients are generated from:
//
//	go run ./internal/cli/genmanifest [FILE]
//
// TestManifestUpToDate fails when the committed file differs from it.
package main

import (
	"fmt"
	"os"

	"github.com/agentvfs/agentvfs/internal/cli"
)

func main() {
	out := "docs/commands.json"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	if err := os.WriteFile(out, cli.Manifest(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genmanifest:", err)
		os.Exit(1)
	}
}
