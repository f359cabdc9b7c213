package bench

// The bench's own child-process supervisor. To be replaced by test/proc,
// the one supervisor the drill and the bench share (issue 13).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// proc is one child process of a real-socket bench: its stdout is scanned
// for the line that tells it is ready and the line with its results.
type proc struct {
	name    string
	cmd     *exec.Cmd
	set     *procSet
	mustRun bool // it ends only when stopped (the sequencer): any exit is a failure
	lines   chan string
	stderr  *prefixWriter
	admin   string // a cluster member's control endpoint (bench --sequencers 3)

	stopping atomic.Bool   // stop was called: its exit is expected
	exited   chan struct{} // closed once it exited; exitErr is set then
	exitErr  error
}

// procSet is the bench's children: the first one that dies unasked is
// reported on died, so that whatever the bench waits for ends at once
// with that child's error instead of waiting for a line that will never
// come.
type procSet struct {
	exe  string // the seqd binary every child runs
	died chan *proc
	// started is every child in the order started (start is called from
	// one goroutine): the idle bench of a cluster finds its members here.
	started []*proc
}

func newProcSet(exe string) *procSet { return &procSet{exe: exe, died: make(chan *proc, 128)} }

func (set *procSet) start(ctx context.Context, name string, mustRun bool, args ...string) (*proc, error) {
	cmd := exec.CommandContext(ctx, set.exe, args...)
	p := &proc{name: name, cmd: cmd, set: set, mustRun: mustRun, lines: make(chan string, 64), exited: make(chan struct{}),
		stderr: &prefixWriter{prefix: name + ": ", w: os.Stderr}}
	cmd.Stderr = p.stderr
	// The bench's end kills its children: an expected death.
	cmd.Cancel = func() error {
		p.stopping.Store(true)
		return cmd.Process.Signal(syscall.SIGKILL)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", name, err)
	}
	set.started = append(set.started, p)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.exitErr = cmd.Wait()
		close(p.exited)
		if !p.stopping.Load() && (p.exitErr != nil || p.mustRun) {
			set.died <- p
		}
	}()
	return p, nil
}

// failure describes how a child ended: its exit status and the last lines
// it wrote on stderr. Call it once the child exited.
func (p *proc) failure() error {
	status := "exited with status 0"
	if p.exitErr != nil {
		status = p.exitErr.Error()
	}
	last := p.stderr.last()
	if len(last) == 0 {
		last = []string{"(none)"}
	}
	return fmt.Errorf("bench: %s died (%s); its last stderr lines:\n%s", p.name, status, strings.Join(last, "\n"))
}

// waitLine returns the first stdout line starting with prefix. It fails
// at once when this child, or any other of the bench, dies unasked.
func (p *proc) waitLine(prefix string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.exited
				return "", fmt.Errorf("%w (before printing %q)", p.failure(), prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l, nil
			}
		case d := <-p.set.died:
			p.set.died <- d // the next wait sees it too
			if d != p {
				return "", d.failure()
			}
		case <-t.C:
			return "", fmt.Errorf("bench: %s printed no %q within %v", p.name, prefix, timeout)
		}
	}
}

// stop asks the process to end (SIGTERM) and kills it if it does not.
func (p *proc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.stopping.Store(true)
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(3 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// stderrLinesKept is how many of a child's last stderr lines a failure
// quotes.
const stderrLinesKept = 10

type prefixWriter struct {
	prefix string
	w      io.Writer
	buf    []byte
	mu     sync.Mutex
	tail   []string // the last stderrLinesKept lines
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := strings.IndexByte(string(p.buf), '\n')
		if i < 0 {
			break
		}
		line := string(p.buf[:i])
		fmt.Fprintf(p.w, "%s%s\n", p.prefix, line)
		if len(p.tail) == stderrLinesKept {
			p.tail = p.tail[1:]
		}
		p.tail = append(p.tail, line)
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}

func (p *prefixWriter) last() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]string(nil), p.tail...)
	if len(p.buf) > 0 {
		out = append(out, string(p.buf))
	}
	return out
}
