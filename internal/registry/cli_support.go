package registry

import "github.com/agentvfs/agentvfs/internal/vfs"

// LiveForks returns the names of the forks that stand on v and whose files
// exist, as Delete counts them; pins of forks that are gone are cleared.
// `avfs vault info` reports them.
func (h *Home) LiveForks(v *vfs.Vault) ([]string, error) {
	return h.liveForks(v)
}
