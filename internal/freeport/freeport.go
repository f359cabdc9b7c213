// Package freeport picks loopback ports for the processes that tests, the
// demo, the drill and the benchmarks start and must name before they run
// (a Raft member is given its peers' addresses at bootstrap, so it cannot
// simply bind port 0 and report what it got).
//
// The usual trick, listening on port 0, closing and passing the port on, is
// racy: the kernel hands the same port out again as the source port of an
// outgoing connection or to another socket bound to port 0 before the
// process that was told to use it binds it. CI saw exactly that: one
// member's fetch listener, bound to port 0, got the port picked for another
// member's Raft transport, and the cluster never formed. So ports here come
// from outside the kernel's ephemeral range, which the kernel never picks
// on its own, are checked free for TCP and UDP, and are reserved for a
// while across processes with a lock file, so that two test binaries
// running in parallel do not pick the same one.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// reserveFor is how long a port handed out stays reserved for the process
// it was picked for to bind it; after that its lock file is stale.
const reserveFor = 10 * time.Minute

// lowest is the lowest port picked: below it live well-known services.
const lowest = 10000

var (
	mu     sync.Mutex
	issued = map[int]bool{}
)

// ErrNone is returned when no port in the range is free.
var ErrNone = errors.New("freeport: no free loopback port outside the ephemeral range")

// Addr returns "127.0.0.1:PORT" for a port that is free for TCP and UDP on
// loopback, outside the kernel's ephemeral range, and not handed out
// before by this or (for reserveFor) another process.
func Addr() (string, error) {
	p, err := Port()
	if err != nil {
		return "", err
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)), nil
}

// Addrs returns n distinct addresses as Addr does.
func Addrs(n int) ([]string, error) {
	out := make([]string, 0, n)
	for range n {
		a, err := Addr()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// MustAddr is Addr for tests: it fails the test when no port is free.
func MustAddr(t interface {
	Helper()
	Fatal(...any)
}) string {
	t.Helper()
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// Port returns a port as Addr describes.
func Port() (int, error) {
	lo, hi := pickRange(ephemeralRange())
	n := hi - lo + 1
	start := rand.IntN(n)
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		p := lo + (start+i)%n
		if issued[p] || !bindable(p) || !reserve(p) {
			continue
		}
		issued[p] = true
		return p, nil
	}
	return 0, ErrNone
}

// ephemeralRange reads the kernel's range of ports it picks by itself;
// Linux's default when it cannot be read.
func ephemeralRange() (int, int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768, 60999
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768, 60999
	}
	lo, err1 := strconv.Atoi(f[0])
	hi, err2 := strconv.Atoi(f[1])
	if err1 != nil || err2 != nil || lo > hi {
		return 32768, 60999
	}
	return lo, hi
}

// pickRange returns the wider of the two ranges around the ephemeral one
// (below it from lowest, or above it), so the kernel never hands out a
// port picked here.
func pickRange(elo, ehi int) (int, int) {
	below := elo - lowest
	above := 65535 - ehi
	if below >= above && below > 0 {
		return lowest, elo - 1
	}
	if above > 0 {
		return ehi + 1, 65535
	}
	// The whole range is ephemeral: the best left is a port checked free.
	return lowest, 65535
}

// bindable reports whether p can be bound on loopback for TCP and UDP now.
func bindable(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	u.Close()
	return true
}

// reserve takes p for reserveFor across processes with a lock file in the
// temporary directory; a stale one is taken over. Where the directory
// cannot be written the port is taken on the bind check alone.
func reserve(p int) bool {
	dir := filepath.Join(os.TempDir(), "seqd-freeport")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	name := filepath.Join(dir, strconv.Itoa(p))
	for range 2 {
		f, err := os.OpenFile(name, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o666)
		if err == nil {
			fmt.Fprintf(f, "%d\n", os.Getpid())
			f.Close()
			return true
		}
		if !errors.Is(err, os.ErrExist) {
			return true
		}
		st, err := os.Stat(name)
		if err != nil || time.Since(st.ModTime()) < reserveFor {
			return false
		}
		os.Remove(name) // stale: its holder had long enough to bind it
	}
	return false
}

// GroupPorts returns a port p such that p..p+n-1 are all free and
// reserved as Port's are: the ports of multicast groups (a stream group
// and its command group per site). Multicast sockets bind 0.0.0.0:p, so a
// port another socket holds, e.g. an ephemeral one, fails their bind:
// these come from outside the ephemeral range, as Port's do.
func GroupPorts(n int) (int, error) {
	lo, hi := pickRange(ephemeralRange())
	span := hi - lo + 2 - n // p+n-1 must stay in range
	if n < 1 || span < 1 {
		return 0, ErrNone
	}
	start := rand.IntN(span)
	mu.Lock()
	defer mu.Unlock()
next:
	for i := range span {
		p := lo + (start+i)%span
		for q := p; q < p+n; q++ {
			if issued[q] || !bindable(q) {
				continue next
			}
		}
		for q := p; q < p+n; q++ {
			if !reserve(q) {
				continue next // the ones taken stay reserved until stale
			}
		}
		for q := p; q < p+n; q++ {
			issued[q] = true
		}
		return p, nil
	}
	return 0, ErrNone
}

// GroupPortsOr is GroupPorts, or fallback when none is free.
func GroupPortsOr(n, fallback int) int {
	if p, err := GroupPorts(n); err == nil {
		return p
	}
	return fallback
}
