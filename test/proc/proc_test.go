package proc

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary is its own child: with PROC_TEST_CHILD set, TestMain
// plays the child that variable names.
func TestMain(m *testing.M) {
	switch os.Getenv("PROC_TEST_CHILD") {
	case "":
		os.Exit(m.Run())
	case "ready-then-wait":
		fmt.Fprintln(os.Stderr, "working")
		fmt.Println("child: ready")
		time.Sleep(time.Minute)
	case "fail":
		fmt.Fprintln(os.Stderr, "first")
		fmt.Fprintln(os.Stderr, "the reason")
		os.Exit(3)
	case "exit0":
		fmt.Println("child: done")
	case "spin":
		// Burns 200 ms of CPU (its own rusage: a loaded machine gives
		// it less than the wall clock's), then exits.
		for t0 := time.Now(); time.Since(t0) < 30*time.Second; {
			var ru syscall.Rusage
			if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil &&
				time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= 200*time.Millisecond {
				break
			}
		}
	case "echo":
		buf := make([]byte, 64)
		n, _ := os.Stdin.Read(buf)
		fmt.Printf("got %s", buf[:n])
		time.Sleep(time.Minute)
	}
}

func child(name, role string, mustRun bool) Spec {
	return Spec{Name: name, Path: os.Args[0], Env: []string{"PROC_TEST_CHILD=" + role}, MustRun: mustRun}
}

func TestProc_WaitLineAndStopIsNoDeath(t *testing.T) {
	set := NewSet("test")
	var stderr strings.Builder
	spec := child("a", "ready-then-wait", true)
	spec.Stderr, spec.Prefix = &syncWriter{b: &stderr}, "a: "
	p, err := set.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := p.WaitLine("child: ready", 10*time.Second); err != nil || l != "child: ready" {
		t.Fatalf("WaitLine = %q, %v", l, err)
	}
	p.Stop()
	if p.Alive() {
		t.Fatal("alive after Stop")
	}
	select {
	case <-set.Died():
		t.Fatalf("a stopped child counted as dead: %v", set.Dead().Failure())
	default:
	}
	if got := p.Stderr(); got != "working\n" {
		t.Fatalf("kept stderr %q", got)
	}
}

// A parent waiting on one child fails at once when another dies, with
// the dead child's status and last stderr lines.
func TestSet_SiblingDeathEndsTheWaitAtOnce(t *testing.T) {
	set := NewSet("test")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	waiter, err := set.Start(ctx, child("waiter", "ready-then-wait", true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := set.Start(ctx, child("victim", "fail", false)); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	_, err = waiter.WaitLine("never", time.Minute)
	if err == nil || time.Since(t0) > 20*time.Second {
		t.Fatalf("WaitLine = %v after %v", err, time.Since(t0))
	}
	for _, want := range []string{"test: victim died (exit status 3)", "its last stderr lines:\nfirst\nthe reason"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q lacks %q", err, want)
		}
	}
	if _, err := waiter.Await(ctx, regexp.MustCompile("never"), 0, "never"); err == nil || !strings.Contains(err.Error(), "victim died") {
		t.Fatalf("Await = %v", err)
	}
}

// A MustRun child that exits 0 died; a child whose exit is Expected did
// not; a line printed before the exit is still found.
func TestSet_MustRunAndExpected(t *testing.T) {
	set := NewSet("")
	p, err := set.Start(context.Background(), child("seq", "exit0", true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitLine("child: done", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := p.WaitLine("more", 10*time.Second); err == nil || !strings.Contains(err.Error(), `seq died (exited with status 0); its last stderr lines:
(none) (before printing "more")`) {
		t.Fatalf("WaitLine after the exit = %v", err)
	}
	<-set.Died()

	set = NewSet("")
	spec := child("fast", "fail", false)
	spec.Expected = func(err error) bool { return err != nil && strings.Contains(err.Error(), "status 3") }
	p, err = set.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	<-p.Exited()
	if set.Dead() != nil {
		t.Fatal("an expected exit counted as a death")
	}
}

func TestProc_SendAndKill(t *testing.T) {
	set := NewSet("")
	spec := child("echo", "echo", true)
	spec.Stdin = true
	p, err := set.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	p.Send("hello")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if m, err := p.Await(ctx, regexp.MustCompile(`^got (\w+)`), 0, "the echo"); err != nil || m[1] != "hello" {
		t.Fatalf("Await = %v, %v", m, err)
	}
	p.Kill()
	if set.Dead() != nil || p.Alive() {
		t.Fatal("Kill: counted as a death, or still alive")
	}
}

type syncWriter struct{ b *strings.Builder }

func (w *syncWriter) Write(p []byte) (int, error) { return w.b.Write(p) }

// CPU is the child's user+system time once it exited (what the bench
// sums into cpu_s_per_million), zero before.
func TestProc_CPUOfAnExitedChild(t *testing.T) {
	set := NewSet("test")
	p, err := set.Start(context.Background(), child("spin", "spin", false))
	if err != nil {
		t.Fatal(err)
	}
	if c := p.CPU(); c != 0 && p.Alive() {
		t.Fatalf("CPU of a running child = %v, want 0", c)
	}
	<-p.Exited()
	if c := p.CPU(); c < 200*time.Millisecond || c > 30*time.Second {
		t.Fatalf("CPU of a child that spun 200ms = %v", c)
	}
}
