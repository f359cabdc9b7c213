package tiered

import "testing"

// bridgeEnd is a live bridge end of pair as gossip shows it.
func bridgeEnd(name, pair string, active bool) Member {
	return Member{Name: name, Meta: Meta{Name: name, Role: RoleBridge, Pair: pair, Active: active}}
}

func TestPairTakeover(t *testing.T) {
	br := bridgeEnd
	cases := []struct {
		name string
		ms   []Member
		want bool
	}{
		{"alone", nil, true},
		{"an active peer", []Member{br("b1", "P", true)}, false},
		{"an active peer of another pair", []Member{br("b1", "Q", true)}, true},
		{"a standby with a lower name", []Member{br("a0", "P", false)}, false},
		{"a standby with a higher name", []Member{br("c9", "P", false)}, true},
		{"itself listed", []Member{br("b5", "P", false)}, true},
		{"a node with the pair's name", []Member{{Name: "a0", Meta: Meta{Name: "a0", Role: RoleNode, Active: true}}}, true},
	}
	for _, c := range cases {
		if got := PairTakeover(c.ms, "P", "b5"); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestPairStepBack(t *testing.T) {
	br := bridgeEnd
	cases := []struct {
		name string
		ms   []Member
		want bool
	}{
		{"alone", nil, false},
		{"an active peer first by name", []Member{br("a1", "P", true)}, true},
		{"an active peer after it by name", []Member{br("c1", "P", true)}, false},
		{"a standby first by name", []Member{br("a1", "P", false)}, false},
		{"an active peer of another pair", []Member{br("a1", "Q", true)}, false},
		{"itself listed", []Member{br("b5", "P", true)}, false},
		{"an active node with a lower name", []Member{{Name: "a0", Meta: Meta{Name: "a0", Role: RoleNode, Active: true}}}, false},
		{"a peer whose meta failed to decode", []Member{{Name: "a1", Err: ErrMeta, Meta: Meta{Role: RoleBridge, Pair: "P", Active: true}}}, false},
	}
	for _, c := range cases {
		if got := PairStepBack(c.ms, "P", "b5"); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	// Two active ends of one pair: exactly one steps back.
	ms := []Member{br("a1", "P", true), br("b5", "P", true)}
	if PairStepBack(ms, "P", "a1") || !PairStepBack(ms, "P", "b5") {
		t.Error("of two active ends, the one later by name must step back, and only it")
	}
}
