package vfs

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"regexp"
	"strings"
)

// Match is one line of a file that a Search found.
type Match struct {
	Path string `json:"path"`
	Line int    `json:"line"` // 1-based
	Text string `json:"text"` // the line, without its newline, cut at MaxMatchLine bytes
}

// MaxMatchLine is how much of a matching line a Match keeps.
const MaxMatchLine = 512

// Search greps the regular files at and below root for lines matching
// re, in path order, without a mount: a file holding a NUL byte in its
// first 8 KiB is binary and skipped, as grep -I does. It stops after max
// matches (0 is no limit) and then reports truncated. Symlinks are not
// followed; a directory cycle is CorruptVault.
func (t *Tx) Search(root string, re *regexp.Regexp, max int) (matches []Match, truncated bool, err error) {
	clean, err := CleanPath(root)
	if err != nil {
		return nil, false, err
	}
	at, err := t.Resolve(clean, true)
	if err != nil {
		return nil, false, err
	}
	s := searcher{t: t, re: re, max: max, out: []Match{}}
	err = s.visit(&DirWalk{}, clean, at)
	if err == errEnough {
		return s.out, true, nil
	}
	return s.out, false, err
}

type searcher struct {
	t   *Tx
	re  *regexp.Regexp
	max int
	out []Match
}

// errEnough ends a search that found max matches.
var errEnough = errors.New("enough matches")

func (s *searcher) visit(w *DirWalk, p string, at Attr) error {
	switch at.Type {
	case TypeFile:
		return s.file(p, at)
	case TypeDir:
		if err := w.Enter(at.Ino); err != nil {
			return err
		}
		ents, err := s.t.ReadDir(at.Ino)
		if err != nil {
			return err
		}
		for _, e := range ents {
			ca, err := s.t.GetAttr(e.Ino)
			if err != nil {
				return err
			}
			if err := s.visit(w, strings.TrimSuffix(p, "/")+"/"+e.Name, ca); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *searcher) file(p string, at Attr) error {
	r := bufio.NewReaderSize(&fileReader{t: s.t, ino: at.Ino}, 64<<10)
	head, err := r.Peek(8 << 10)
	if err != nil && err != io.EOF && err != bufio.ErrBufferFull {
		return err
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return nil
	}
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if len(line) == 0 && err == io.EOF {
			return nil
		}
		if err != nil && err != io.EOF {
			return err
		}
		text := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		if s.re.Match(text) {
			if len(text) > MaxMatchLine {
				text = text[:MaxMatchLine]
			}
			s.out = append(s.out, Match{Path: p, Line: n, Text: string(text)})
			if s.max > 0 && len(s.out) >= s.max {
				return errEnough
			}
		}
		if err == io.EOF {
			return nil
		}
	}
}

// fileReader reads a file of a transaction from its start.
type fileReader struct {
	t   *Tx
	ino Ino
	off int64
}

func (f *fileReader) Read(p []byte) (int, error) {
	n, err := f.t.Read(f.ino, f.off, p)
	f.off += int64(n)
	if err == nil && n == 0 {
		return 0, io.EOF
	}
	return n, err
}
