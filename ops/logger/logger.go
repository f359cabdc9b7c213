package logger

import (
	"github.com/seqd/seqd/node"
)

// Logger is the node.Handler of `seqd logger`: it writes every message
// of the stream it follows to rotated files. Attach it to its node
// before Run (a local timer of the node flushes the buffer, on the
// node's goroutine, which alone touches the files). A write error
// stops the logging: Failed is closed and Err says why, and the shell
// stops the node (a log with a hole in it would say nothing about it).
type Logger struct {
	cfg    Config
	fs     files
	buf    []byte
	n      *node.Node
	err    error
	failed chan struct{}
	lines  uint64
	closed bool
}

// New validates cfg; no file is opened before the first message.
func New(cfg Config) (*Logger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Logger{cfg: cfg, fs: files{cfg: cfg}, failed: make(chan struct{})}, nil
}

const flushTimer = 1

// Attach arms the flush timer on n, the node l is the handler of.
func (l *Logger) Attach(n *node.Node) {
	l.n = n
	n.SetLocalTimer(flushTimer, l.cfg.FlushInterval)
}

// OnLocalTimer flushes buffered lines and re-arms itself.
func (l *Logger) OnLocalTimer(id uint64) {
	if id != flushTimer {
		return
	}
	if l.err == nil {
		l.fail(l.fs.flush())
	}
	l.n.SetLocalTimer(flushTimer, l.cfg.FlushInterval)
}

// OnMessage writes m.
func (l *Logger) OnMessage(m *node.Message) {
	if l.err != nil || (m.Internal() && !l.cfg.Internal) {
		return
	}
	if l.closed {
		l.fail(ErrClosed)
		return
	}
	l.buf = AppendLine(l.buf[:0], m, l.cfg.Format, l.cfg.MaxPayloadBytes)
	if err := l.fs.write(l.buf, m.Time); err != nil {
		l.fail(err)
		return
	}
	l.lines++
}

func (l *Logger) fail(err error) {
	if err != nil && l.err == nil {
		l.err = err
		close(l.failed)
	}
}

// Failed is closed once a write failed.
func (l *Logger) Failed() <-chan struct{} { return l.failed }

// Err is the first write error (nil: none). Read it after Failed is
// closed, or after the node stopped.
func (l *Logger) Err() error { return l.err }

// Lines is how many messages were written; call it after the node
// stopped.
func (l *Logger) Lines() uint64 { return l.lines }

// Close flushes and closes the open file; call it after the node
// stopped (no more OnMessage).
func (l *Logger) Close() error {
	l.closed = true
	err := l.fs.closeFile()
	if l.err != nil {
		return l.err
	}
	return err
}
