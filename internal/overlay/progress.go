package overlay

import (
	"context"
	"time"
)

// Progress hears, while a layer is materialized, how many names are
// written so far of about how many the state holds (inodes: hard links
// make the names a few more); the last report, once all is written, has
// done equal to total. A first run on a vault of 100,000 files spends
// 8–13 s there, and a terminal should see it move (a serving process
// relays it to the process that waits for it, mountd.Request.Progress).
type Progress func(done, total int)

type progressKey struct{}

// WithProgress makes materializing under ctx report to fn.
func WithProgress(ctx context.Context, fn Progress) context.Context {
	return context.WithValue(ctx, progressKey{}, fn)
}

// ProgressOf is the Progress ctx carries, or nil.
func ProgressOf(ctx context.Context) Progress {
	fn, _ := ctx.Value(progressKey{}).(Progress)
	return fn
}

// progressEvery is how often a materialize reports.
const progressEvery = 100 * time.Millisecond
