package tiered

import (
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/freeport"
)

// replayerState is what a replayer's MetaFunc reads.
type replayerState struct {
	tier    uint8
	load    atomic.Uint32
	highest atomic.Uint64
}

func (s *replayerState) meta(name string) MetaFunc {
	return func() Meta {
		return Meta{Role: RoleReplayer, Tier: s.tier, Load: s.load.Load(), Session: 77, Lowest: 1, Highest: s.highest.Load(),
			NAKAddr: name + ".nak:7401", RewindAddr: name + ".rewind:7402"}
	}
}

func startAgent(t *testing.T, name string, seeds []string, meta MetaFunc) *Agent {
	t.Helper()
	cfg := TestConfig()
	cfg.Name = name
	cfg.Seeds = seeds
	a, err := NewAgent(cfg, meta)
	if err != nil {
		t.Fatalf("agent %s: %v", name, err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

// eventually waits for cond, which gossip makes true in a few protocol
// periods; the deadline only bounds a failure, it measures nothing.
func eventually(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: never happened; now %s", what, state())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func names(ms []Member) string {
	var s []string
	for _, m := range ms {
		s = append(s, fmt.Sprintf("%s(tier=%d load=%d err=%v)", m.Name, m.Meta.Tier, m.Meta.Load, m.Err))
	}
	sort.Strings(s)
	return strings.Join(s, " ")
}

// TestAgent_SelectionFollowsMembership: three replayers and a node gossip
// over real memberlist instances on loopback. The node selects the
// tier-1 replayer with the least load; when that load rises, the other
// one; when that one leaves, the first again; when it dies (no goodbye),
// the tier-2 replayer; nothing for a seq no one holds.
func TestAgent_SelectionFollowsMembership(t *testing.T) {
	n := startAgent(t, "node", nil, func() Meta { return Meta{Role: RoleNode} })
	seeds := []string{n.Addr()}
	st := map[string]*replayerState{"r1": {tier: 1}, "r2": {tier: 1}, "r3": {tier: 2}}
	st["r1"].load.Store(1)
	st["r2"].load.Store(5)
	agents := map[string]*Agent{}
	for _, name := range []string{"r1", "r2", "r3"} {
		st[name].highest.Store(1000)
		agents[name] = startAgent(t, name, seeds, st[name].meta(name))
	}
	q := Query{Session: 77, From: 10, NeedRewind: true}
	selected := func() string {
		m, ok := n.Select(q)
		if !ok {
			return ""
		}
		return m.Name
	}
	state := func() string { return fmt.Sprintf("selected %q among %s", selected(), names(n.Members())) }
	eventually(t, "four members", func() bool { return len(n.Members()) == 4 && len(n.Replayers()) == 3 }, state)
	for _, m := range n.Members() {
		if m.Err != nil {
			t.Fatal(m.Err)
		}
		if m.Name == "r3" && (m.Meta.RewindAddr != "r3.rewind:7402" || m.Meta.Highest != 1000 || m.Meta.Session != 77) {
			t.Fatalf("r3 announced %+v", m.Meta)
		}
	}
	if got := selected(); got != "r1" {
		t.Fatalf("selected %q, want r1 (tier 1, least loaded); %s", got, state())
	}

	st["r1"].load.Store(9)
	eventually(t, "r2 once r1's load rose", func() bool { return selected() == "r2" }, state)

	if err := agents["r2"].Close(); err != nil {
		t.Fatalf("r2 leave: %v", err)
	}
	eventually(t, "r1 once r2 left", func() bool { return selected() == "r1" }, state)

	if err := agents["r1"].kill(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "r3 (tier 2) once r1 died", func() bool { return selected() == "r3" }, state)
	eventually(t, "r1 gone from the members", func() bool { return len(n.Members()) == 2 }, state)

	if _, ok := n.Select(Query{Session: 77, From: 1001}); ok {
		t.Fatalf("a replayer selected for a seq no one holds")
	}
	st["r3"].highest.Store(2000)
	eventually(t, "r3 for seq 1001 once it holds it", func() bool {
		m, ok := n.Select(Query{Session: 77, From: 1001})
		return ok && m.Name == "r3"
	}, state)
}

// TestAgent_RejoinsWhenTheSeedComesUp: an agent whose seed is not up yet
// starts anyway and joins once the seed runs.
func TestAgent_RejoinsWhenTheSeedComesUp(t *testing.T) {
	port := freePort(t)
	seed := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	b := startAgent(t, "late", []string{seed}, func() Meta { return Meta{Role: RoleNode} })
	if b.Joined() {
		t.Fatal("joined a seed that does not run")
	}
	cfg := TestConfig()
	cfg.Name, cfg.BindPort = "seed", port
	a, err := NewAgent(cfg, func() Meta { return Meta{Role: RoleSequencer} })
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	eventually(t, "join after the seed came up", func() bool { return b.Joined() && len(a.Members()) == 2 },
		func() string { return names(a.Members()) })
}

// freePort returns a port free for both UDP and TCP on loopback now.
func freePort(t *testing.T) int {
	t.Helper()
	p, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSeeds(t *testing.T) {
	got, err := ParseSeeds("10.0.0.1:7000, 10.0.0.2 host3:1")
	if err != nil || strings.Join(got, " ") != "10.0.0.1:7000 10.0.0.2:7946 host3:1" {
		t.Fatalf("ParseSeeds = %q %v", got, err)
	}
	for _, bad := range []string{"h:0", "h:x", ":7000", "h:70000"} {
		if _, err := ParseSeeds(bad); err == nil {
			t.Errorf("ParseSeeds(%q) accepted", bad)
		}
	}
	t.Setenv(SeedsEnv, "127.0.0.1:1")
	cfg := TestConfig()
	cfg.RejoinInterval = time.Hour
	a, err := NewAgent(cfg, func() Meta { return Meta{Role: RoleNode} })
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Joined() || strings.Join(a.cfg.Seeds, ",") != "127.0.0.1:1" {
		t.Fatalf("seeds from %s: %q joined=%v", SeedsEnv, a.cfg.Seeds, a.Joined())
	}
	t.Setenv(SeedsEnv, "bad:port")
	if _, err := NewAgent(TestConfig(), func() Meta { return Meta{Role: RoleNode} }); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad %s: %v", SeedsEnv, err)
	}
}

func TestConfig_Validate(t *testing.T) {
	for _, c := range []struct {
		name string
		mod  func(*Config)
	}{
		{"BindAddr", func(c *Config) { c.BindAddr = "localhost" }},
		{"BindPort", func(c *Config) { c.BindPort = 70000 }},
		{"MetaInterval", func(c *Config) { c.MetaInterval = 0 }},
		{"Seeds", func(c *Config) { c.Seeds = []string{"x:y"} }},
	} {
		cfg := DefaultConfig()
		c.mod(&cfg)
		if err := cfg.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%s: %v", c.name, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestAgent_RefreshAnnouncesAtOnce: a node instance whose activation
// changed calls Refresh, and the others see the new Meta without waiting
// for MetaInterval (an hour here: without Refresh they would not see it
// within the test's deadline).
func TestAgent_RefreshAnnouncesAtOnce(t *testing.T) {
	var active atomic.Bool
	cfg := TestConfig()
	cfg.Name, cfg.MetaInterval = "inst", time.Hour
	inst, err := NewAgent(cfg, func() Meta {
		return Meta{Role: RoleNode, Account: "SHOP", Instance: 1, Active: active.Load(), Applied: 5}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { inst.Close() })
	obs := startAgent(t, "observer", []string{inst.Addr()}, func() Meta { return Meta{Role: RoleNode} })
	seen := func() (Meta, bool) {
		for _, m := range obs.Members() {
			if m.Name == "inst" {
				return m.Meta, true
			}
		}
		return Meta{}, false
	}
	state := func() string { m, ok := seen(); return fmt.Sprintf("inst listed %v as %+v", ok, m) }
	eventually(t, "the instance listed, passive", func() bool { m, ok := seen(); return ok && m.Account == "SHOP" && !m.Active }, state)
	active.Store(true)
	inst.Refresh()
	eventually(t, "the instance listed active after Refresh", func() bool { m, _ := seen(); return m.Active }, state)
}
