package proc

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// StderrLinesKept is how many of a child's last stderr lines Failure
// quotes.
const StderrLinesKept = 10

// stderrBytesKept bounds the stderr a Proc keeps for Stderr: a chatty
// child must not grow its parent's memory without bound.
const stderrBytesKept = 64 << 10

// StopTimeout is how long Stop waits after SIGTERM before it kills.
const StopTimeout = 3 * time.Second

// Spec says how to start one child.
type Spec struct {
	// Name names the child in its prefixed lines and in failures.
	Name string
	// Path is the program; empty means this process's own executable
	// (seqd starting its own subcommands).
	Path string
	Args []string
	// Env is added to this process's environment.
	Env []string
	// MustRun says that the child ends only when stopped (a sequencer):
	// an exit with status 0 is a death too.
	MustRun bool
	// Stdin gives the child a pipe to its stdin (Send).
	Stdin bool
	// Stderr receives the child's stderr, line by line, each prefixed
	// with Prefix. nil: it is only kept (Stderr, Failure).
	Stderr io.Writer
	Prefix string
	// Stdout, when set, receives a copy of every stdout line (a log file).
	Stdout io.Writer
	// Expected, when set, says that an exit is part of the child's
	// contract (a fast node stopped by a divergence): the set does not
	// count it as a death.
	Expected func(err error) bool
}

// Set is the children of one run. The first child that dies unasked is
// its Dead one, and every wait of every child of the set ends with it.
type Set struct {
	label string

	mu      sync.Mutex
	started []*Proc
	dead    *Proc
	deadc   chan struct{} // closed when dead is set
}

// NewSet returns an empty set whose errors begin with label ("bench").
func NewSet(label string) *Set {
	return &Set{label: label, deadc: make(chan struct{})}
}

// Died is closed once a child of the set died unasked (see Dead).
func (s *Set) Died() <-chan struct{} { return s.deadc }

// Dead is the first child that died unasked, or nil.
func (s *Set) Dead() *Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dead
}

// Started is every child in the order started.
func (s *Set) Started() []*Proc {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Proc(nil), s.started...)
}

// StopAll stops every child still running.
func (s *Set) StopAll() {
	for _, p := range s.Started() {
		p.Stop()
	}
}

func (s *Set) errorf(format string, a ...any) error {
	if s.label != "" {
		format = s.label + ": " + format
	}
	return fmt.Errorf(format, a...)
}

func (s *Set) died(p *Proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead == nil {
		s.dead = p
		close(s.deadc)
	}
}

// Proc is one running child.
type Proc struct {
	spec  Spec
	set   *Set
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu       sync.Mutex
	lines    []string
	next     int           // WaitLine's cursor in lines
	changed  chan struct{} // closed and replaced at each new line
	stopping bool          // Stop, Kill or the context: its exit is expected
	stderr   *lineWriter

	exited  chan struct{} // closed once it exited; exitErr is set then
	exitErr error
}

// Start starts a child; it is killed (an expected death) when ctx ends.
func (s *Set) Start(ctx context.Context, spec Spec) (*Proc, error) {
	path := spec.Path
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		path = exe
	}
	cmd := exec.CommandContext(ctx, path, spec.Args...)
	if len(spec.Env) > 0 {
		cmd.Env = append(os.Environ(), spec.Env...)
	}
	p := &Proc{spec: spec, set: s, cmd: cmd, changed: make(chan struct{}), exited: make(chan struct{}),
		stderr: &lineWriter{prefix: spec.Prefix, w: spec.Stderr}}
	cmd.Stderr = p.stderr
	cmd.Cancel = func() error {
		p.mu.Lock()
		p.stopping = true
		p.mu.Unlock()
		return cmd.Process.Signal(syscall.SIGKILL)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if spec.Stdin {
		if p.stdin, err = cmd.StdinPipe(); err != nil {
			return nil, err
		}
	}
	if err := cmd.Start(); err != nil {
		return nil, s.errorf("start %s: %w", spec.Name, err)
	}
	s.mu.Lock()
	s.started = append(s.started, p)
	s.mu.Unlock()
	go p.collect(out)
	return p, nil
}

func (p *Proc) collect(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if p.spec.Stdout != nil {
			fmt.Fprintln(p.spec.Stdout, l)
		}
		p.mu.Lock()
		p.lines = append(p.lines, l)
		close(p.changed)
		p.changed = make(chan struct{})
		p.mu.Unlock()
	}
	err := p.cmd.Wait()
	p.stderr.flush()
	p.mu.Lock()
	p.exitErr = err
	stopping := p.stopping
	p.mu.Unlock()
	expected := stopping || (p.spec.Expected != nil && p.spec.Expected(err))
	if !expected && (err != nil || p.spec.MustRun) {
		p.set.died(p)
	}
	close(p.exited)
}

// Name is the child's name.
func (p *Proc) Name() string { return p.spec.Name }

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// CPU is the user and system time the child used (its rusage, as
// wait(2) reported it); zero until it exited.
func (p *Proc) CPU() time.Duration {
	select {
	case <-p.exited:
	default:
		return 0
	}
	st := p.cmd.ProcessState
	if st == nil {
		return 0
	}
	return st.UserTime() + st.SystemTime()
}

// Exited is closed once the child exited.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Alive says whether the child still runs.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Err is the child's exit error (nil: status 0); valid once Exited.
func (p *Proc) Err() error {
	<-p.exited
	return p.exitErr
}

// Lines is a copy of the stdout lines printed so far.
func (p *Proc) Lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// LineCount is how many stdout lines it printed so far.
func (p *Proc) LineCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.lines)
}

// Find returns the submatches of the first line (from the from-th on)
// matching re and its index, or nil and the number of lines.
func (p *Proc) Find(re *regexp.Regexp, from int) ([]string, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := from; i < len(p.lines); i++ {
		if m := re.FindStringSubmatch(p.lines[i]); m != nil {
			return m, i
		}
	}
	return nil, len(p.lines)
}

// Stderr is what the child wrote on stderr (its last 64 KiB).
func (p *Proc) Stderr() string { return p.stderr.String() }

// Send writes line to the child's stdin (a Spec with Stdin).
func (p *Proc) Send(line string) {
	if p.stdin != nil {
		_, _ = io.WriteString(p.stdin, line+"\n")
	}
}

// Failure describes how the child ended: its exit status and the last
// lines it wrote on stderr. Call it once the child exited.
func (p *Proc) Failure() error {
	<-p.exited
	status := "exited with status 0"
	if p.exitErr != nil {
		status = p.exitErr.Error()
	}
	last := p.stderr.last(StderrLinesKept)
	if len(last) == 0 {
		last = []string{"(none)"}
	}
	return p.set.errorf("%s died (%s); its last stderr lines:\n%s", p.spec.Name, status, strings.Join(last, "\n"))
}

// WaitLine returns the first stdout line starting with prefix that no
// earlier WaitLine returned or passed over. It fails at once when this
// child, or any other of its set, dies unasked, and after timeout.
func (p *Proc) WaitLine(prefix string, timeout time.Duration) (string, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		p.mu.Lock()
		for p.next < len(p.lines) {
			l := p.lines[p.next]
			p.next++
			if strings.HasPrefix(l, prefix) {
				p.mu.Unlock()
				return l, nil
			}
		}
		changed := p.changed
		p.mu.Unlock()
		select {
		case <-changed:
		case <-p.exited:
			if p.LineCount() > p.cursor() {
				continue // the lines it printed before it ended
			}
			return "", fmt.Errorf("%w (before printing %q)", p.Failure(), prefix)
		case <-p.set.deadc:
			if d := p.set.Dead(); d != p {
				return "", d.Failure()
			}
			<-p.exited // this one: the case above answers
		case <-t.C:
			return "", p.set.errorf("%s printed no %q within %v", p.spec.Name, prefix, timeout)
		}
	}
}

func (p *Proc) cursor() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next
}

// Await waits for a line matching re printed at or after line from and
// returns its submatches. It fails when the child exited without it (the
// error names what), when ctx ends, and at once when any child of the
// set died unasked.
func (p *Proc) Await(ctx context.Context, re *regexp.Regexp, from int, what string) ([]string, error) {
	for {
		p.mu.Lock()
		changed := p.changed
		p.mu.Unlock()
		if m, _ := p.Find(re, from); m != nil {
			return m, nil
		}
		select {
		case <-changed:
		case <-p.exited:
			if m, _ := p.Find(re, from); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("%s exited before %s", p.spec.Name, what)
		case <-p.set.deadc:
			if d := p.set.Dead(); d != p {
				return nil, d.Failure()
			}
			<-p.exited // this one: the case above answers
		case <-ctx.Done():
			return nil, fmt.Errorf("%s: no %s", p.spec.Name, what)
		}
	}
}

// Signal sends sig to the child; its exit then counts as a death unless
// it is Expected (use Kill or Stop to end it on purpose).
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill ends the child with SIGKILL, an expected death, and waits for it.
func (p *Proc) Kill() {
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.exited
}

// Stop asks the child to end (SIGTERM) and kills it if it has not within
// StopTimeout; its exit is expected.
func (p *Proc) Stop() {
	if !p.Alive() {
		return
	}
	p.mu.Lock()
	p.stopping = true
	p.mu.Unlock()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(StopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}
