// Command gendoc writes docs/cli-reference.md from the avfs command tree:
//
//	go run ./internal/cli/gendoc [FILE]
//
// TestReferenceUpToDate fails when the committed file differs from it.
package main

import (
	"fmt"
	"os"

	"github.com/agentvfs/agentvfs/internal/cli"
)

func main() {
	out := "docs/cli-reference.md"
	if len(os.Args) > 1 {
		out = os.Args[1]
	}
	if err := os.WriteFile(out, []byte(cli.Reference()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}
