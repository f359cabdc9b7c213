package tiered

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAgent_KeyringRefusesRogue: a node and a replayer gossip with a key
// (Config.Keys); a rogue without it, and one with another key, announce
// a tier-2 replayer that holds everything and name the node as their
// seed. The rogues are never joined: the node does not list them and
// never selects them for a seq only they claim. The control, the same
// rogue against a node without keys, is selected (the attack:
// nodes rewound from it and delivered altered records).
func TestAgent_KeyringRefusesRogue(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	keyed := func(name string, seeds []string, keys [][]byte, meta MetaFunc) (*Agent, error) {
		cfg := TestConfig()
		cfg.Name, cfg.Seeds, cfg.Keys = name, seeds, keys
		a, err := NewAgent(cfg, meta)
		if err == nil {
			t.Cleanup(func() { a.Close() })
		}
		return a, err
	}
	rogueMeta := func() Meta {
		return Meta{Role: RoleReplayer, Tier: 2, Session: 77, Lowest: 1, Highest: 1 << 40, NAKAddr: "rogue.nak:1", RewindAddr: "rogue.rewind:2"}
	}
	real := &replayerState{tier: 1}
	real.highest.Store(1000)

	for _, withKeys := range []bool{true, false} {
		var keys [][]byte
		if withKeys {
			keys = [][]byte{key}
		}
		n, err := keyed("node", nil, keys, func() Meta { return Meta{Role: RoleNode} })
		if err != nil {
			t.Fatal(err)
		}
		if _, err := keyed("r1", []string{n.Addr()}, keys, real.meta("r1")); err != nil {
			t.Fatal(err)
		}
		state := func() string { return names(n.Members()) }
		eventually(t, "r1 joined", func() bool { return len(n.Replayers()) == 1 }, state)
		// The rogues start after r1 so that the node's view is settled.
		r0, _ := keyed("rogue", []string{n.Addr()}, nil, rogueMeta)
		r2, _ := keyed("rogue2", []string{n.Addr()}, [][]byte{bytes.Repeat([]byte{9}, 32)}, rogueMeta)
		q := Query{Session: 77, From: 1001, NeedRewind: true}
		if !withKeys {
			eventually(t, "control: the rogue selected without keys", func() bool {
				m, ok := n.Select(q)
				return ok && m.Name == "rogue"
			}, state)
			continue
		}
		if r0.Joined() || r2.Joined() {
			t.Fatalf("a rogue joined a keyed gossip: rogue %v rogue2 %v", r0.Joined(), r2.Joined())
		}
		// Some protocol periods for a rogue to get in, if it could.
		time.Sleep(20 * TestConfig().ProbeInterval)
		for _, m := range n.Members() {
			if strings.HasPrefix(m.Name, "rogue") {
				t.Fatalf("the keyed node lists %s: %s", m.Name, state())
			}
		}
		if m, ok := n.Select(q); ok {
			t.Fatalf("the keyed node selected %s for a seq only the rogues claim", m.Name)
		}
		if m, ok := n.Select(Query{Session: 77, From: 10, NeedRewind: true}); !ok || m.Name != "r1" {
			t.Fatalf("the keyed node selected %q, want r1", m.Name)
		}
	}
}

func TestReadKeyFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(text), 0o600)
		return p
	}
	keys, err := ReadKeyFile(write("two", "# new first\n"+strings.Repeat("ab", 32)+"\n\n"+"BwcHBwcHBwcHBwcHBwcHBw==\n"))
	if err != nil || len(keys) != 2 || len(keys[0]) != 32 || len(keys[1]) != 16 {
		t.Fatalf("ReadKeyFile = %d keys, %v", len(keys), err)
	}
	for name, text := range map[string]string{"short": "abcd\n", "junk": "not a key!\n", "empty": "# none\n"} {
		if _, err := ReadKeyFile(write(name, text)); err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("ReadKeyFile(%s) = %v, want an error naming the file", name, err)
		}
	}
	if _, err := ReadKeyFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing file: %v", err)
	}
}
