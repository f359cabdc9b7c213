package freeport

import (
	"fmt"
	"net"
	"strconv"
	"testing"
)

func TestPort_OutsideEphemeralRangeDistinctAndBindable(t *testing.T) {
	elo, ehi := ephemeralRange()
	seen := map[int]bool{}
	for range 50 {
		p, err := Port()
		if err != nil {
			t.Fatal(err)
		}
		if elo > lowest && p >= elo && p <= ehi {
			t.Fatalf("port %d inside the ephemeral range %d-%d", p, elo, ehi)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d not bindable: %v", p, err)
		}
		l.Close()
	}
}

func TestPort_SkipsABoundPort(t *testing.T) {
	// Bind every port but one of a tiny range is not possible here; check
	// instead that a port bound by someone else is not bindable.
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if bindable(p) {
		t.Fatalf("port %d reported bindable while a listener holds it", p)
	}
}

func TestPickRange(t *testing.T) {
	for _, c := range []struct{ elo, ehi, lo, hi int }{
		{32768, 60999, lowest, 32767},
		{49152, 65535, lowest, 49151},
		{1024, 30000, 30001, 65535},
		{1024, 65535, lowest, 65535},
	} {
		lo, hi := pickRange(c.elo, c.ehi)
		if lo != c.lo || hi != c.hi {
			t.Errorf("pickRange(%d,%d) = %d,%d; want %d,%d", c.elo, c.ehi, lo, hi, c.lo, c.hi)
		}
	}
}

func TestReserve_OtherProcessHoldsIt(t *testing.T) {
	p, err := Port()
	if err != nil {
		t.Fatal(err)
	}
	// This process now holds p's lock file: a second reservation (as
	// another process would try) is refused while it is fresh.
	if reserve(p) {
		t.Fatalf("port %d reserved twice", p)
	}
}

// TestGroupPorts: n consecutive ports, outside the ephemeral range, free
// for UDP, and never handed out twice.
func TestGroupPorts(t *testing.T) {
	elo, ehi := ephemeralRange()
	seen := map[int]bool{}
	for range 20 {
		p, err := GroupPorts(6)
		if err != nil {
			t.Fatal(err)
		}
		for q := p; q < p+6; q++ {
			if q >= elo && q <= ehi {
				t.Fatalf("port %d is in the ephemeral range %d-%d", q, elo, ehi)
			}
			if seen[q] {
				t.Fatalf("port %d handed out twice", q)
			}
			seen[q] = true
			u, err := net.ListenPacket("udp", fmt.Sprintf("0.0.0.0:%d", q))
			if err != nil {
				t.Fatalf("port %d: %v", q, err)
			}
			u.Close()
		}
	}
}
