package proxy

import (
	"github.com/agentvfs/agentvfs/internal/overlay"
	"github.com/agentvfs/agentvfs/internal/transport/overlaymount"
)

// clearLayers empties the layer cache in the runtime dir of a home that
// is gone (overlay.Cache.Clear: what mounts hold and runs' pending writes
// stay).
func clearLayers(runDir string) {
	c := &overlay.Cache{Root: overlaymount.CacheDir(runDir)}
	_, _ = c.Clear()
}
