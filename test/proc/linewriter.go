package proc

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
)

// lineWriter is a child's stderr: it copies each complete line, prefixed,
// to w (when set) and keeps the last stderrBytesKept bytes.
type lineWriter struct {
	prefix string
	w      io.Writer

	mu   sync.Mutex
	buf  []byte // the partial line not yet copied
	kept []byte
}

func (l *lineWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kept = append(l.kept, b...)
	if over := len(l.kept) - stderrBytesKept; over > 0 {
		l.kept = append(l.kept[:0], l.kept[over:]...)
	}
	l.buf = append(l.buf, b...)
	for {
		i := bytes.IndexByte(l.buf, '\n')
		if i < 0 {
			break
		}
		if l.w != nil {
			fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf[:i])
		}
		l.buf = l.buf[i+1:]
	}
	return len(b), nil
}

// flush copies a last line that had no newline.
func (l *lineWriter) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf) > 0 && l.w != nil {
		fmt.Fprintf(l.w, "%s%s\n", l.prefix, l.buf)
	}
	l.buf = nil
}

func (l *lineWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.kept)
}

// last is the last n lines kept (with a last line that had no newline).
func (l *lineWriter) last(n int) []string {
	s := strings.TrimSuffix(l.String(), "\n")
	if s == "" {
		return nil
	}
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}
