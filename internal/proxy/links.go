package proxy

import (
	"errors"

	"github.com/agentvfs/agentvfs/internal/mountd"
	"github.com/agentvfs/agentvfs/internal/policy"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// vaultLinks shows the classifier the vault's symlinks, so that --cwd and
// ".." are judged where they lead in the mount (a -> . makes a/.. the
// parent of the working directory, not the working directory). A live
// read-write mount's server answers (it holds every write made through
// it): a lingering overlay's from its merged dir, a FUSE mount's from the
// vault, its writes flushed; else the vault is opened here on the first
// question, after other mounts have persisted what they buffer. When neither can answer, every
// name is taken for a link to ".", so any ".." climbs: the strict reading.
type vaultLinks struct {
	rt     *Runtime
	vault  string
	asked  bool
	mnt    string // the live mount whose server answers, or ""
	merged bool   // mnt is an overlay's merged dir, whose server reads it
	v      *vfs.Vault
	failed bool
	cache  map[string]link
}

type link = mountd.Link

type readlinkArgs struct {
	Path string `json:"path"`
}

var _ policy.Links = (*vaultLinks)(nil)

func (l *vaultLinks) Readlink(p string) (string, bool) {
	if c, ok := l.cache[p]; ok {
		return c.Target, c.OK
	}
	c, err := l.readlink(p)
	if err != nil {
		c = link{Target: ".", OK: true}
	}
	if l.cache == nil {
		l.cache = map[string]link{}
	}
	l.cache[p] = c
	return c.Target, c.OK
}

func (l *vaultLinks) readlink(p string) (link, error) {
	if !l.asked {
		l.asked = true
		l.mnt = l.rt.liveMount(l.vault)
		l.merged = l.mnt != "" && l.rt.transportOf(l.mnt) == transportOverlay
	}
	if l.merged {
		// The merged dir is the live state: no ingest before the answer.
		if c, err := mountd.WorkspaceReadlink(l.rt.Home, l.mnt, p); err == nil {
			return c, nil
		}
	}
	if l.mnt != "" {
		var c link
		err := mountd.Call(l.rt.Home, l.mnt, opReadlink, readlinkArgs{Path: p}, &c)
		if !errors.Is(err, mountd.ErrNoControl) {
			return c, err
		}
		l.mnt = ""
	}
	if l.v == nil && !l.failed {
		_ = mountd.Persist(l.rt.Home, l.vault)
		v, err := l.rt.Home.Open(l.vault)
		if err != nil {
			l.failed = true
		} else {
			l.v = v
		}
	}
	if l.failed {
		return link{}, errors.New("the vault cannot be read here")
	}
	return readlinkIn(l.v, p)
}

// readlinkIn is the target of the symlink at p in v; ok is false when p
// is not a symlink (or does not exist: it cannot lead anywhere yet).
func readlinkIn(v *vfs.Vault, p string) (link, error) {
	var c link
	err := v.View(func(tx *vfs.Tx) error {
		a, err := tx.Resolve(p, false)
		if err != nil || a.Type != vfs.TypeSymlink {
			return nil
		}
		t, err := tx.Readlink(a.Ino)
		if err != nil {
			return err
		}
		c = link{Target: t, OK: true}
		return nil
	})
	return c, err
}

func (l *vaultLinks) close() {
	if l.v != nil {
		l.v.Close()
		l.v = nil
	}
}

// Classify is the policy's decision for req run in vault, the vault's
// symlinks seen (`policy check` shows what `proxy exec` decides).
func (rt *Runtime) Classify(vault string, req policy.Request) policy.Decision {
	links := &vaultLinks{rt: rt, vault: vault}
	defer links.close()
	req.Links = links
	return policy.Classify(req, rt.Policy)
}

func (rt *Runtime) classify(req Request) policy.Decision {
	return rt.Classify(req.Vault, policy.Request{Argv: req.Argv, Shell: req.Shell, Cwd: req.Cwd, Env: req.Env})
}
