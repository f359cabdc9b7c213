package cluster

import (
	"context"
	"net/http"
	"strconv"
	"sync"

	"github.com/seqd/seqd/fsm"
)

// Clients of the control endpoint, for `seqd admin` and tests. Each call
// is bounded by ctx.

var adminClient = &http.Client{}

// FetchStatus asks the member at addr for its status.
func FetchStatus(ctx context.Context, addr string) (MemberStatus, error) {
	var s MemberStatus
	err := call(ctx, adminClient, http.MethodGet, addr, "/v1/status", nil, &s)
	return s, err
}

// MemberAnswer is one member's status, or why it could not be read.
type MemberAnswer struct {
	Member fsm.Member
	Status MemberStatus
	Err    error
}

// FetchAll asks every member that from lists for its status, in
// parallel, in the order of the list.
func FetchAll(ctx context.Context, from MemberStatus) []MemberAnswer {
	out := make([]MemberAnswer, len(from.Members))
	var wg sync.WaitGroup
	for i, m := range from.Members {
		out[i].Member = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].Status, out[i].Err = FetchStatus(ctx, m.AdminAddr)
		}()
	}
	wg.Wait()
	return out
}

// RequestTransfer asks the primary at addr to hand its role to member to
// (0: any standby) and returns the outcome.
func RequestTransfer(ctx context.Context, addr string, to uint64) (Handover, error) {
	var h Handover
	err := call(ctx, adminClient, http.MethodPost, addr, "/v1/transfer?to="+strconv.FormatUint(to, 10), nil, &h)
	return h, err
}

// RequestAddMember asks the primary at addr to add m as a voter.
func RequestAddMember(ctx context.Context, addr string, m fsm.Member) error {
	var s MemberStatus
	return call(ctx, adminClient, http.MethodPost, addr, "/v1/members", m, &s)
}

// RequestRemoveMember asks the primary at addr to remove member id.
func RequestRemoveMember(ctx context.Context, addr string, id uint64) error {
	var s MemberStatus
	return call(ctx, adminClient, http.MethodDelete, addr, "/v1/members?id="+strconv.FormatUint(id, 10), nil, &s)
}
