package main

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/ops"
)

// statusMember is an ops.Member that only has a status.
type statusMember struct{ st ops.MemberStatus }

func (m statusMember) Status() ops.MemberStatus { return m.st }
func (m statusMember) TransferPrimary(context.Context, uint64) (ops.Handover, error) {
	return ops.Handover{}, ops.ErrNotPrimary
}
func (m statusMember) AddMember(fsm.Member) error { return ops.ErrNotPrimary }
func (m statusMember) RemoveMember(uint64) error  { return ops.ErrNotPrimary }

// TestAdminStatus_CatchingUpMember: a member whose failover state holds
// no members yet is "catching up", exit 3, not an empty table with exit 0.
func TestAdminStatus_CatchingUpMember(t *testing.T) {
	srv := httptest.NewServer(ops.AdminHandler(statusMember{ops.MemberStatus{ID: 3, Role: "standby", RaftState: "Follower"}}))
	defer srv.Close()
	err := newApp().Run([]string{"seqd", "admin", "status", "--addr", strings.TrimPrefix(srv.URL, "http://"), "--timeout", "2s"})
	var ce *codedError
	if !errors.As(err, &ce) || ce.code != exitDegraded || !strings.Contains(err.Error(), "member 3 is catching up") {
		t.Fatalf("%v, want exit %d: member 3 is catching up", err, exitDegraded)
	}
}

// TestClusterView_Verdict: the exit status of `seqd admin status` from
// what the members answered.
func TestClusterView_Verdict(t *testing.T) {
	voter := func(id uint64) ops.Peer { return ops.Peer{ID: id, Role: "voter"} }
	up := func(id uint64, role string) ops.MemberAnswer {
		return ops.MemberAnswer{Member: voter(id), Status: ops.MemberStatus{ID: id, Role: role, Epoch: 2}}
	}
	down := func(id uint64) ops.MemberAnswer {
		return ops.MemberAnswer{Member: voter(id), Err: ops.ErrUnreachable}
	}
	for _, tc := range []struct {
		name    string
		all     []ops.MemberAnswer
		ready   []error
		primary uint64
		want    int
	}{
		{"all ready", []ops.MemberAnswer{up(1, "primary"), up(2, "standby"), up(3, "standby")}, []error{nil, nil, nil}, 1, 0},
		{"one catching up", []ops.MemberAnswer{up(1, "primary"), up(2, "standby"), up(3, "standby")}, []error{nil, ops.ErrNotReady, nil}, 1, exitDegraded},
		{"one down", []ops.MemberAnswer{up(1, "primary"), up(2, "standby"), down(3)}, []error{nil, nil, nil}, 1, exitDegraded},
		{"two down", []ops.MemberAnswer{up(1, "primary"), down(2), down(3)}, []error{nil, nil, nil}, 1, exitDown},
		{"no primary", []ops.MemberAnswer{up(1, "standby"), up(2, "standby"), up(3, "standby")}, []error{nil, nil, nil}, 0, exitDown},
	} {
		v := clusterView{all: tc.all, ready: tc.ready, primary: tc.primary}
		if got, words := v.verdict(); got != tc.want {
			t.Errorf("%s: %d (%s), want %d", tc.name, got, words, tc.want)
		}
	}
}
