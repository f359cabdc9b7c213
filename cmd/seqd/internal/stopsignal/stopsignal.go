// Package stopsignal catches SIGTERM and SIGINT from the first moments of
// a seqd process, so that a stop request that arrives while the process
// is still parsing its configuration or opening its sockets ends it
// gracefully instead of killing it by the signal's default action (exit
// status 143 and no final line).
//
// The handler is installed in this package's init: it depends only on the
// standard library, so Go initialises it before the heavier libraries seqd
// links, and well before main runs. Only the Go runtime's own start-up
// (well under a millisecond) comes before it.
package stopsignal

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

var (
	sigs   = make(chan os.Signal, 2)
	mu     sync.Mutex
	first  os.Signal
	ctx    context.Context
	cancel context.CancelFunc
)

func init() {
	ctx, cancel = context.WithCancel(context.Background())
	signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	go watch()
}

// watch cancels the context on the first signal; a second one means the
// graceful stop is not wanted (or stuck): the process exits at once with
// 128+signal, as a shell reports a killed process.
func watch() {
	s := <-sigs
	mu.Lock()
	first = s
	mu.Unlock()
	cancel()
	s = <-sigs
	code := 128 + 15
	if s == os.Interrupt {
		code = 128 + 2
	}
	os.Exit(code)
}

// Context is done once SIGTERM or SIGINT was received, at any time since
// the process started.
func Context() context.Context { return ctx }

// Received returns the first stop signal received, or nil.
func Received() os.Signal {
	mu.Lock()
	defer mu.Unlock()
	return first
}
