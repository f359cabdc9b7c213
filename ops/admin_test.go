package ops

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/seqd/seqd/fsm"
)

// fakeMember is a Member twin: a status, and an error for each call.
type fakeMember struct {
	mu       sync.Mutex
	status   MemberStatus
	err      error
	added    []fsm.Member
	removed  []uint64
	transfer []uint64
}

func (f *fakeMember) Status() MemberStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

func (f *fakeMember) TransferPrimary(_ context.Context, to uint64) (Handover, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.transfer = append(f.transfer, to)
	if f.err != nil {
		return Handover{}, f.err
	}
	return Handover{From: f.status.ID, To: to, Epoch: f.status.Epoch + 1}, nil
}

func (f *fakeMember) AddMember(m fsm.Member) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.added = append(f.added, m)
	return f.err
}

func (f *fakeMember) RemoveMember(id uint64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, id)
	return f.err
}

func serve(t *testing.T, m Member) string {
	t.Helper()
	srv := httptest.NewServer(AdminHandler(m))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

// TestAdmin_StatusTransferAndMembersRoundTrip: what the client asks
// reaches the member, and what the member answers reaches the client.
func TestAdmin_StatusTransferAndMembersRoundTrip(t *testing.T) {
	f := &fakeMember{status: MemberStatus{ID: 2, Role: "primary", Epoch: 4, Primary: 2,
		Change: &Change{Epoch: 4, Cut: 99}, Members: []Peer{{ID: 2, Role: "voter", RaftAddr: "r2", AdminAddr: "127.0.0.1:1"}}}}
	addr := serve(t, f)
	ctx := context.Background()
	st, err := FetchStatus(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != 2 || st.Role != "primary" || st.Epoch != 4 || st.Change == nil || st.Change.Cut != 99 || len(st.Members) != 1 || st.Members[0].AdminAddr != "127.0.0.1:1" {
		t.Fatalf("status %+v", st)
	}
	h, err := RequestTransfer(ctx, addr, 3)
	if err != nil || h.From != 2 || h.To != 3 || h.Epoch != 5 {
		t.Fatalf("transfer: %+v, %v", h, err)
	}
	m := fsm.Member{ID: 4, Role: fsm.Voter, RaftAddr: "r4", AdminAddr: "a4", StreamAddr: "s4"}
	if err := RequestAddMember(ctx, addr, m); err != nil {
		t.Fatal(err)
	}
	if err := RequestRemoveMember(ctx, addr, 3); err != nil {
		t.Fatal(err)
	}
	if len(f.transfer) != 1 || f.transfer[0] != 3 || len(f.added) != 1 || f.added[0] != m || len(f.removed) != 1 || f.removed[0] != 3 {
		t.Fatalf("member saw transfers %v, added %v, removed %v", f.transfer, f.added, f.removed)
	}
	all := FetchAll(ctx, st)
	if len(all) != 1 || all[0].Err == nil {
		t.Fatalf("FetchAll of a member whose port refuses: %+v, want its error", all)
	}
}

// TestAdmin_ErrorsCrossTheWire: each sentinel the member returns is the
// sentinel the client returns, with the member's text once.
func TestAdmin_ErrorsCrossTheWire(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want error // nil: no sentinel, only the text
	}{
		{fmt.Errorf("%w: member 1; the leader is 2", ErrNotPrimary), ErrNotPrimary},
		{fmt.Errorf("%w: 9", ErrUnknownMember), ErrUnknownMember},
		{fmt.Errorf("%w: removing member 3 leaves 2 voters", ErrTooFewVoters), ErrTooFewVoters},
		{errors.New("cluster: something else"), nil},
	} {
		t.Run(tc.err.Error(), func(t *testing.T) {
			addr := serve(t, &fakeMember{err: tc.err})
			err := RequestRemoveMember(context.Background(), addr, 3)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("%v, want %v", err, tc.want)
			}
			if !strings.Contains(err.Error(), tc.err.Error()) {
				t.Fatalf("%q lost the member's text %q", err, tc.err)
			}
			if tc.want != nil && strings.Count(err.Error(), tc.want.Error()) != 1 {
				t.Fatalf("%q repeats %q", err, tc.want)
			}
		})
	}
}

// TestAdmin_BadRequests: a malformed body or id is a 400, never a call.
func TestAdmin_BadRequests(t *testing.T) {
	f := &fakeMember{}
	addr := serve(t, f)
	ctx := context.Background()
	// A 400 comes back as ErrBadArgs (the text no longer carries the
	// status code: users read the reason).
	if err := DefaultClient.call(ctx, "DELETE", addr, "/v1/members?id=x", nil, &MemberStatus{}); !errors.Is(err, ErrBadArgs) {
		t.Fatalf("remove with id x: %v, want a 400 (ErrBadArgs)", err)
	}
	if err := DefaultClient.call(ctx, "POST", addr, "/v1/members", "not a member", &MemberStatus{}); !errors.Is(err, ErrBadArgs) {
		t.Fatalf("add with a string body: %v, want a 400 (ErrBadArgs)", err)
	}
	if _, err := DefaultClient.Exec(ctx, addr, "remove-member x", nil); !errors.Is(err, ErrBadArgs) {
		t.Fatalf("remove-member x: %v, want ErrBadArgs", err)
	}
	if len(f.added) != 0 || len(f.removed) != 0 {
		t.Fatalf("member called: added %v removed %v", f.added, f.removed)
	}
}
