package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/refs"
	"github.com/agentvfs/agentvfs/internal/registry"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// transferResult is the JSON of import and export.
type transferResult struct {
	Source      string    `json:"source"`
	Destination string    `json:"destination"`
	Vault       string    `json:"vault"`
	Files       int       `json:"files"`
	Dirs        int       `json:"dirs"`
	Symlinks    int       `json:"symlinks"`
	Hardlinks   int       `json:"hardlinks"` // names made as extra links to a file already transferred
	Bytes       int64     `json:"bytes"`
	Skipped     []skipped `json:"skipped"`
	DurationMS  float64   `json:"duration_ms"`
	// Origin is what an import of a directory into / recorded (see
	// vault create --from); absent otherwise.
	Origin *vfs.Origin `json:"origin,omitempty"`
	verb   string
}

type skipped struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

func (r transferResult) human(w io.Writer) {
	fmt.Fprintf(w, "%s %s -> %s: %d files, %d dirs, %d symlinks, %d hard links, %s in %.0f ms\n", r.verb,
		r.Source, r.Destination, r.Files, r.Dirs, r.Symlinks, r.Hardlinks, sizeString(r.Bytes), r.DurationMS)
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s: %s\n", s.Path, s.Reason)
	}
	if r.Origin != nil {
		fmt.Fprintf(w, "origin %s (checkpoint %s)\n", r.Origin.HostDir, r.Origin.Checkpoint)
	}
}

func (a *app) importCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "import HOST_PATH [VAULT_PATH]",
		Short: "Copy files from the host into the selected vault",
		Long: `Copy HOST_PATH from the host into the selected vault. A directory's content
goes into VAULT_PATH (default /, created when missing); a single file goes
to VAULT_PATH, or into it when it is a directory (default /NAME).

Modes, modification times, empty directories, symlinks and hard links are
kept. Symlinks are copied as links and never followed, HOST_PATH itself
included, so nothing outside HOST_PATH is read. Files already in the vault
are replaced and directories merged; sockets and device files are skipped
and listed in "skipped". Owners and extended attributes are not copied.

Data moves in 1 MiB steps and about 4 MiB per transaction, so memory stays
bounded whatever the file sizes. Each file is put in place whole, by the
transaction that writes its last step, so a file refused half-way (a quota)
leaves what the vault held at its name. An import is not one transaction:
save a checkpoint first to be able to undo it.

A directory imported into / becomes the vault's origin, as with vault
create --from: a checkpoint ("origin", or "origin-N" when taken) holds
what was imported, and avfs apply writes the changes made since then back
into the directory by default. vault info shows it.`,
		Args: rangeArgs(1, 2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			return a.withVault(func(_ *registry.Home, v *vfs.Vault) (any, error) {
				start := time.Now()
				r, err := a.importTree(v, args[0], argOr(args, 1, ""))
				if err != nil {
					return nil, err
				}
				if info, err := os.Lstat(args[0]); err == nil && info.IsDir() && r.Destination == "/" {
					if r.Origin, err = recordOrigin(v, r.Source); err != nil {
						return nil, err
					}
				}
				r.DurationMS = ms(time.Since(start))
				return r, nil
			})
		}),
	}
}

func (a *app) exportCmd() *cobra.Command {
	var force bool
	var at string
	c := &cobra.Command{
		Use:   "export [VAULT_PATH] HOST_DIR",
		Short: "Copy files from the selected vault to a host directory",
		Long: `Copy VAULT_PATH (default /) of the selected vault into HOST_DIR, which is
created when missing. A directory's content goes into HOST_DIR; a single
file goes to HOST_DIR/NAME. The export reads one consistent state.

Modes, modification times, empty directories, symlinks (as links, with
their text unchanged) and hard links are kept; setuid and setgid bits,
owners, device files, fifos and sockets are not (these are listed in
"skipped").

Nothing is ever written outside HOST_DIR, whatever the vault holds: every
directory is opened relative to its parent without following symlinks,
files are created exclusively and never through a symlink. Existing files
in HOST_DIR are not replaced (AlreadyExists) unless --force is given, which
replaces files and symlinks but never follows them; existing directories
are merged.

--at REF exports a past state instead of the working state. ` + refHelp,
		Args: rangeArgs(1, 2),
		RunE: a.run(func(cmd *cobra.Command, args []string) (any, error) {
			src, dst := "/", args[0]
			if len(args) == 2 {
				src, dst = args[0], args[1]
			}
			return a.withState(at, func(_ *registry.Home, s refs.State) (any, error) {
				start := time.Now()
				r, err := a.exportTree(s.StateRef, src, dst, force)
				if err != nil {
					return nil, err
				}
				r.DurationMS = ms(time.Since(start))
				return r, nil
			})
		}),
	}
	c.Flags().BoolVarP(&force, "force", "f", false, "replace existing files and symlinks in HOST_DIR")
	atFlag(c, &at)
	return c
}

// progressDelay is how long a transfer runs before its progress bar
// appears: short runs draw nothing.
var progressDelay = 250 * time.Millisecond

// progress draws a one-line progress bar on a terminal's stderr; it draws
// nothing with --json or when stderr is not a terminal.
type progress struct {
	w            io.Writer
	label        string
	on, drawn    bool
	start, last  time.Time
	files, total int
	bytes, size  int64
}

func (a *app) newProgress(label string) *progress {
	return &progress{w: a.env.Stderr, label: label, start: time.Now(),
		on: !a.jsonOut && a.env.IsTerminal(a.env.Stderr)}
}

// setTotal sets the expected totals.
func (p *progress) setTotal(files int, bytes int64) { p.total, p.size = files, bytes }

func (p *progress) add(files int, bytes int64) {
	p.files += files
	p.bytes += bytes
	if !p.on {
		return
	}
	now := time.Now()
	if now.Sub(p.start) < progressDelay || now.Sub(p.last) < 100*time.Millisecond {
		return
	}
	p.last = now
	p.draw()
}

func (p *progress) draw() {
	frac := 1.0
	switch {
	case p.size > 0:
		frac = float64(p.bytes) / float64(p.size)
	case p.total > 0:
		frac = float64(p.files) / float64(p.total)
	}
	frac = min(max(frac, 0), 1)
	const width = 24
	n := int(frac * width)
	sizes := ""
	if p.size > 0 || p.bytes > 0 {
		sizes = "  " + sizeString(p.bytes) + "/" + sizeString(p.size)
	}
	fmt.Fprintf(p.w, "\r%s [%s%s] %3.0f%%  %d/%d files%s\x1b[K", p.label, strings.Repeat("#", n),
		strings.Repeat("-", width-n), frac*100, p.files, p.total, sizes)
	p.drawn = true
}

// done clears the bar.
func (p *progress) done() {
	if p.drawn {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.drawn = false
	}
}

// materializing gives ctx a progress bar for the overlay's materializing
// of a state's layers (overlay.WithProgress), cleared by its last report:
// a first run on a large vault writes its files for seconds before the
// command starts.
func (a *app) materializing(ctx context.Context) context.Context {
	p := a.newProgress("avfs: materializing the vault's layers")
	if !p.on {
		return ctx
	}
	var mu sync.Mutex
	return overlay.WithProgress(ctx, func(done, total int) {
		mu.Lock()
		defer mu.Unlock()
		if done >= total {
			p.done()
			return
		}
		p.files, p.total = done, total
		p.add(0, 0)
	})
}
