//go:build !linux

package proxy

// clearLayers does nothing: only Linux has the overlay transport, and so
// a layer cache.
func clearLayers(string) {}
