package proxy

import (
	"github.com/agentvfs/agentvfs/internal/policy"
	"github.com/agentvfs/agentvfs/internal/vfs"
)

// vaultLinks shows the classifier the vault's symlinks, so that --cwd and
// ".." are judged where they lead in the mount (a -> . makes a/.. the
// parent of the working directory, not the working directory). The vault
// is opened on the first question, after live mounts have persisted what
// they buffer, and closed by close. When it cannot be opened beside its
// writer, every name is taken for a link to ".", so any ".." climbs: the
// strict reading.
type vaultLinks struct {
	rt     *Runtime
	vault  string
	v      *vfs.Vault
	failed bool
	cache  map[string]link
}

type link struct {
	target string
	ok     bool
}

var _ policy.Links = (*vaultLinks)(nil)

func (l *vaultLinks) Readlink(p string) (string, bool) {
	if c, ok := l.cache[p]; ok {
		return c.target, c.ok
	}
	if l.v == nil && !l.failed {
		l.rt.flushMounts(l.vault)
		v, err := l.rt.Home.Open(l.vault)
		if err != nil {
			l.failed = true
		} else {
			l.v = v
		}
	}
	if l.failed {
		return ".", true
	}
	var c link
	err := l.v.View(func(tx *vfs.Tx) error {
		a, err := tx.Resolve(p, false)
		if err != nil || a.Type != vfs.TypeSymlink {
			return nil // a missing name cannot lead anywhere yet
		}
		t, err := tx.Readlink(a.Ino)
		if err == nil {
			c = link{target: t, ok: true}
		}
		return nil
	})
	if err != nil {
		c = link{target: ".", ok: true}
	}
	if l.cache == nil {
		l.cache = map[string]link{}
	}
	l.cache[p] = c
	return c.target, c.ok
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
