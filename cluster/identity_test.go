package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seqd/seqd/fsm"
)

// TestIdentity_RefusesAnotherMemberOrPeerSet: the directory records the
// member and its peer set at the first start; a start with another id
// (member 3 on member 2's directory used to run with member 2's Raft
// log, silently) or another peer set is refused naming both, unless the
// member joins.
func TestIdentity_RefusesAnotherMemberOrPeerSet(t *testing.T) {
	ms := []fsm.Member{
		{ID: 1, RaftAddr: "127.0.0.1:1", AdminAddr: "127.0.0.1:11", StreamAddr: "127.0.0.1:21"},
		{ID: 2, RaftAddr: "127.0.0.1:2", AdminAddr: "127.0.0.1:12", StreamAddr: "127.0.0.1:22"},
		{ID: 3, RaftAddr: "127.0.0.1:3", AdminAddr: "127.0.0.1:13", StreamAddr: "127.0.0.1:23"},
	}
	dir := t.TempDir()
	cfg := MemberConfig{ID: 2, Dir: dir, Members: ms}
	if err := CheckIdentity(cfg); err != nil {
		t.Fatalf("first start: %v", err)
	}
	if err := RecordIdentity(cfg); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, IdentityFile))
	want := "seqd member 1\nid 2\npeers 1@127.0.0.1:1@127.0.0.1:11@127.0.0.1:21,2@127.0.0.1:2@127.0.0.1:12@127.0.0.1:22,3@127.0.0.1:3@127.0.0.1:13@127.0.0.1:23\n"
	if err != nil || string(b) != want {
		t.Fatalf("identity file %q (%v), want %q", b, err, want)
	}
	if _, err := os.Stat(filepath.Join(dir, IdentityFile+".tmp")); !os.IsNotExist(err) {
		t.Fatalf("temporary file left: %v", err)
	}
	// The same member, its peers in another order: the same set.
	same := cfg
	same.Members = []fsm.Member{ms[2], ms[0], ms[1]}
	if err := CheckIdentity(same); err != nil {
		t.Fatalf("restart with the same peers: %v", err)
	}

	three := cfg
	three.ID = 3
	err = CheckIdentity(three)
	if !errors.Is(err, ErrIdentityID) || !strings.Contains(err.Error(), dir+" is member 2's directory, this is member 3") {
		t.Fatalf("member 3 on member 2's directory: %v, want ErrIdentityID naming both", err)
	}

	moved := cfg
	moved.Members = []fsm.Member{ms[0], ms[1], {ID: 4, RaftAddr: "127.0.0.1:4", AdminAddr: "127.0.0.1:14", StreamAddr: "127.0.0.1:24"}}
	err = CheckIdentity(moved)
	if !errors.Is(err, ErrIdentityPeers) || !strings.Contains(err.Error(), "3@127.0.0.1:3@") || !strings.Contains(err.Error(), "now given 1@127.0.0.1:1@127.0.0.1:11@127.0.0.1:21,2@127.0.0.1:2@127.0.0.1:12@127.0.0.1:22,4@") {
		t.Fatalf("another peer set: %v, want ErrIdentityPeers with both lists", err)
	}
	moved.Join = true
	if err := CheckIdentity(moved); err != nil {
		t.Fatalf("another peer set with Join: %v", err)
	}
	// A recorded file is kept (the first start's).
	if err := RecordIdentity(moved); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, IdentityFile)); string(b) != want {
		t.Fatalf("identity file rewritten: %q", b)
	}

	if err := os.WriteFile(filepath.Join(dir, IdentityFile), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := CheckIdentity(cfg); !errors.Is(err, ErrIdentity) {
		t.Fatalf("unreadable identity file: %v, want ErrIdentity", err)
	}
}

// TestMemberConfig_IDNotInPeers: an id that the member list lacks is
// reported as such, not as the empty raft address its missing entry
// gives (`--id 4` with three peers said raft-addr = "").
func TestMemberConfig_IDNotInPeers(t *testing.T) {
	cfg := DefaultMemberConfig()
	cfg.ID = 4
	cfg.Members = []fsm.Member{
		{ID: 1, RaftAddr: "127.0.0.1:1", AdminAddr: "127.0.0.1:11", StreamAddr: "127.0.0.1:21"},
		{ID: 2, RaftAddr: "127.0.0.1:2", AdminAddr: "127.0.0.1:12", StreamAddr: "127.0.0.1:22"},
		{ID: 3, RaftAddr: "127.0.0.1:3", AdminAddr: "127.0.0.1:13", StreamAddr: "127.0.0.1:23"},
	}
	err := cfg.Validate()
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "ID = 4, want one of 1, 2, 3 (id 4 is not in --peers)") {
		t.Fatalf("id 4 of three peers: %v", err)
	}
}

// TestIdentity_PeersDifferFromTheFailoverState: a member whose --peers
// differs from the members the cluster recorded (another member
// bootstrapped it from its own list) is told, with both lists; roles do
// not count, and a joining member's list is only whom to contact.
func TestIdentity_PeersDifferFromTheFailoverState(t *testing.T) {
	ms := []fsm.Member{
		{ID: 1, Role: fsm.Voter, RaftAddr: "127.0.0.1:1", AdminAddr: "127.0.0.1:11", StreamAddr: "127.0.0.1:21"},
		{ID: 2, Role: fsm.Voter, RaftAddr: "127.0.0.1:2", AdminAddr: "127.0.0.1:12", StreamAddr: "127.0.0.1:22"},
		{ID: 3, Role: fsm.Voter, RaftAddr: "127.0.0.1:3", AdminAddr: "127.0.0.1:13", StreamAddr: "127.0.0.1:23"},
	}
	st := fsm.Initial()
	for i, m := range ms {
		var err error
		if st, err = st.Apply(uint64(i+1), fsm.AddMember{Member: m}); err != nil {
			t.Fatal(err)
		}
	}
	given := []fsm.Member{ms[1], ms[0], ms[2]}
	given[0].Role = 0
	if rec, was, ok := peersDiffer(given, false, st); ok {
		t.Fatalf("the same members in another order: differ %q %q", rec, was)
	}
	given[2].RaftAddr = "127.0.0.1:9"
	rec, was, ok := peersDiffer(given, false, st)
	if !ok || !strings.Contains(rec, "3@127.0.0.1:3@") || !strings.Contains(was, "3@127.0.0.1:9@") {
		t.Fatalf("another raft address for member 3: differ=%v recorded %q given %q", ok, rec, was)
	}
	if _, _, ok := peersDiffer(given, true, st); ok {
		t.Fatal("a joining member warned")
	}
}
