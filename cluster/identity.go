package cluster

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/seqd/seqd/fsm"
)

// IdentityFile is the file in a member's directory (MemberConfig.Dir)
// that records, at its first start, which member the directory is and
// the peer set it bootstrapped with:
//
//	seqd member 1
//	id 2
//	peers 1@RAFT@ADMIN@PEER,2@...,3@...
//
// A later start with another id is refused (ErrIdentityID): the Raft log
// and the stream store are member 2's, and member 3 running on them
// would vote and ack twice. Another peer set is refused
// (ErrIdentityPeers) unless the member joins (MemberConfig.Join): a
// joining member's list only says whom to contact, and a member added by
// add-member never bootstraps from it. After add-member or remove-member
// changed the group, start a bootstrap member with the list it was first
// given (Raft holds the current membership), or delete the file to
// record the new list.
const IdentityFile = "member"

// identityHeader is the first line of IdentityFile (its version).
const identityHeader = "seqd member 1"

// identity is what IdentityFile records.
type identity struct {
	id    uint64
	peers string // peerList of the members
}

// peerList is ms as --peers spells it, sorted by id: the canonical form
// compared between starts.
func peerList(ms []fsm.Member) string {
	ms = slices.Clone(ms)
	slices.SortFunc(ms, func(a, b fsm.Member) int { return cmp.Compare(a.ID, b.ID) })
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = fmt.Sprintf("%d@%s@%s@%s", m.ID, m.RaftAddr, m.AdminAddr, m.StreamAddr)
	}
	return strings.Join(parts, ",")
}

// CheckIdentity compares cfg with the IdentityFile in cfg.Dir: nil when
// there is none (a first start) or it matches; else an error wrapping
// ErrIdentityID or ErrIdentityPeers that names the directory and both
// values. A file it cannot read or parse is an error too (ErrIdentity).
func CheckIdentity(cfg MemberConfig) error {
	path := filepath.Join(cfg.Dir, IdentityFile)
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrIdentity, err)
	}
	got, err := parseIdentity(b)
	if err != nil {
		return fmt.Errorf("%w: %s: %v", ErrIdentity, path, err)
	}
	if got.id != cfg.ID {
		return fmt.Errorf("%w: %s is member %d's directory, this is member %d (start member %d on it, or give member %d a directory of its own)",
			ErrIdentityID, cfg.Dir, got.id, cfg.ID, got.id, cfg.ID)
	}
	if want := peerList(cfg.Members); !cfg.Join && got.peers != want {
		return fmt.Errorf("%w: member %d in %s bootstrapped with peers %s, now given %s (give every member the same --peers; after add-member or remove-member, the first list or --join; or remove %s to record the new one)",
			ErrIdentityPeers, cfg.ID, cfg.Dir, got.peers, want, path)
	}
	return nil
}

func parseIdentity(b []byte) (identity, error) {
	var id identity
	sc := bufio.NewScanner(bytes.NewReader(b))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 3 || lines[0] != identityHeader {
		return id, fmt.Errorf("want %q, an id line and a peers line, got %q", identityHeader, b)
	}
	v, ok := strings.CutPrefix(lines[1], "id ")
	n, err := strconv.ParseUint(v, 10, 64)
	if !ok || err != nil || n == 0 {
		return id, fmt.Errorf("bad id line %q", lines[1])
	}
	p, ok := strings.CutPrefix(lines[2], "peers ")
	if !ok {
		return id, fmt.Errorf("bad peers line %q", lines[2])
	}
	return identity{id: n, peers: p}, nil
}

// RecordIdentity writes cfg's IdentityFile in cfg.Dir unless one is
// there (CheckIdentity compared it): atomically, as a temporary file
// fsynced, renamed, and the directory fsynced, so that a crash leaves
// the old file, the new one or none, never a torn one.
func RecordIdentity(cfg MemberConfig) error {
	path := filepath.Join(cfg.Dir, IdentityFile)
	if _, err := os.Stat(path); err == nil {
		return nil
	}
	body := fmt.Sprintf("%s\nid %d\npeers %s\n", identityHeader, cfg.ID, peerList(cfg.Members))
	tmp := path + ".tmp"
	if err := writeSynced(tmp, []byte(body)); err != nil {
		return fmt.Errorf("%w: record: %v", ErrIdentity, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("%w: record: %v", ErrIdentity, err)
	}
	d, err := os.Open(cfg.Dir)
	if err != nil {
		return fmt.Errorf("%w: record: %v", ErrIdentity, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("%w: record: fsync %s: %v", ErrIdentity, cfg.Dir, err)
	}
	return nil
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// peersDiffer compares the peer list a member was given (--peers) with
// the members its failover state records (roles aside), and returns both
// lists when they differ and the member did not join: members given
// inconsistent lists at bootstrap (each bootstraps Raft from its own)
// started without a word. After add-member or remove-member the lists
// differ legitimately, so this is a warning, not a refusal.
func peersDiffer(given []fsm.Member, join bool, st *fsm.State) (recorded, was string, differ bool) {
	rec := st.Members()
	if join || len(rec) == 0 {
		return "", "", false
	}
	recorded, was = peerList(rec), peerList(given)
	return recorded, was, recorded != was
}
