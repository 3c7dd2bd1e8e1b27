package cli

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"sync"
	"unicode/utf8"

	"github.com/agentvfs/agentvfs/internal/proxy"
)

// eventWriter prints `proxy exec --stream`'s JSON Lines
// (docs/schema/proxy-exec-stream.json): one event a line, the command's
// output as it comes, from both streams' goroutines.
type eventWriter struct {
	mu     sync.Mutex
	w      io.Writer
	chunks map[string]*proxy.TextChunks
}

// stream is the writer of one output stream's events.
func (e *eventWriter) stream(name string) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.output(name, e.chunksOf(name).Next(p))
		return len(p), nil
	})
}

func (e *eventWriter) chunksOf(name string) *proxy.TextChunks {
	if e.chunks == nil {
		e.chunks = map[string]*proxy.TextChunks{}
	}
	if e.chunks[name] == nil {
		e.chunks[name] = &proxy.TextChunks{}
	}
	return e.chunks[name]
}

// output prints one piece of output: as text in data, or in data_base64
// when it is not UTF-8.
func (e *eventWriter) output(name string, b []byte) {
	switch {
	case len(b) == 0:
	case utf8.Valid(b):
		e.write(map[string]any{"event": name, "data": string(b)})
	default:
		e.write(map[string]any{"event": name, "data_base64": base64.StdEncoding.EncodeToString(b)})
	}
}

// flush prints what a stream that ended inside a UTF-8 sequence held.
func (e *eventWriter) flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range []string{"stdout", "stderr"} {
		if c := e.chunks[name]; c != nil {
			e.output(name, c.Rest())
		}
	}
}

// line prints one event.
func (e *eventWriter) line(v any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.write(v)
}

func (e *eventWriter) write(v any) {
	enc := json.NewEncoder(e.w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
