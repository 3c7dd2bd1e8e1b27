// Command genmanifest writes what the TypeScript and Python clients are
// generated from (by npm/scripts/gen-types.mjs) that only the Go code
// knows: docs/commands.json, the manifest of the avfs command tree
// (commands, flags, positional arguments, output schemas), and the enum of
// error kinds in docs/schema/error.json. Run it from the repository root:
//
//	go run ./internal/cli/genmanifest
//
// TestManifestUpToDate and TestErrorKindsEnum fail when a committed file
// differs from it.
package main

import (
	"fmt"
	"os"

	"github.com/agentvfs/agentvfs/internal/cli"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "genmanifest:", err)
		os.Exit(1)
	}
}

func run() error {
	m, err := cli.Manifest()
	if err != nil {
		return err
	}
	if err := os.WriteFile("docs/commands.json", m, 0o644); err != nil {
		return err
	}
	const errFile = "docs/schema/error.json"
	cur, err := os.ReadFile(errFile)
	if err != nil {
		return err
	}
	b, err := cli.ErrorSchema(cur)
	if err != nil {
		return err
	}
	return os.WriteFile(errFile, b, 0o644)
}
