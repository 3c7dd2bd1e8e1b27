package fusefs

import (
	"log"
	"time"

	"github.com/agentvfs/agentvfs/internal/vfs"
)

// collector is the mount's background garbage collection: after commits,
// at most once per gcEvery, it asks the vault whether enough room went
// into use since the last collection (vfs.AutoGC, a look at the engine's
// space and one read) and, when it did, collects and gives the room back
// to the host. It uses the vault's own transactions: each waits for the
// open batch, and a batch waits for at most one bounded step of it.
type collector struct {
	v      *vfs.Vault
	logger *log.Logger
	kick   chan struct{}
	stop   chan struct{}
	done   chan struct{}
}

// gcEvery is how long the collector rests after a commit woke it: the
// commits of a burst then cost one look. It bounds how much garbage a
// fast writer adds before the look that starts a collection, so it stays
// short; a look costs tens of microseconds.
const gcEvery = 100 * time.Millisecond

func startCollector(v *vfs.Vault, logger *log.Logger) *collector {
	c := &collector{v: v, logger: logger, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// committed wakes the collector; it never blocks.
func (c *collector) committed() {
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *collector) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		select {
		case <-c.stop:
			return
		case <-time.After(gcEvery):
		}
		select {
		case <-c.kick: // commits while it rested: this run covers them
		default:
		}
		start := time.Now()
		st, ran, err := c.v.AutoGC()
		if c.logger == nil {
			continue
		}
		switch {
		case err != nil:
			c.logger.Printf("gc: %v", err)
		case ran:
			// The benchmark reads these lines for the cost of the work.
			c.logger.Printf("gc: freed %d chunks (%d bytes), kept %d, gave back %d bytes in %.1f ms, longest step %.1f ms",
				st.ChunksFreed, st.BytesFreed, st.ChunksKept, st.BytesReclaimed,
				float64(time.Since(start))/1e6, float64(st.LongestStep)/1e6)
		}
	}
}

// close stops the collector, waiting for a collection in progress.
func (c *collector) close() {
	if c == nil {
		return
	}
	close(c.stop)
	<-c.done
}
