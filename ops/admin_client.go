package ops

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/seqd/seqd/fsm"
)

// Clients of the admin endpoint, for `seqd admin`, drills and tests. Each
// call is bounded by ctx.

var adminClient = &http.Client{}

// FetchStatus asks the member at addr for its status.
func FetchStatus(ctx context.Context, addr string) (MemberStatus, error) {
	var s MemberStatus
	err := call(ctx, adminClient, http.MethodGet, addr, "/v1/status", nil, &s)
	return s, err
}

// MemberAnswer is one member's status, or why it could not be read.
type MemberAnswer struct {
	Member Peer
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
	return call(ctx, adminClient, http.MethodPost, addr, "/v1/members", PeerOf(m), &s)
}

// RequestRemoveMember asks the primary at addr to remove member id.
func RequestRemoveMember(ctx context.Context, addr string, id uint64) error {
	var s MemberStatus
	return call(ctx, adminClient, http.MethodDelete, addr, "/v1/members?id="+strconv.FormatUint(id, 10), nil, &s)
}

// remoteError is an error the endpoint answered: its text, and the
// sentinel its status stands for.
type remoteError struct {
	kind error
	msg  string
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

// call does one request to an admin endpoint and decodes the JSON answer
// into out.
func call(ctx context.Context, c *http.Client, method, addr, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		msg := string(bytes.TrimSpace(b))
		var kind error
		switch resp.StatusCode {
		case http.StatusMisdirectedRequest:
			kind = ErrNotPrimary
		case http.StatusNotFound:
			kind = ErrUnknownMember
		case http.StatusPreconditionFailed:
			kind = ErrTooFewVoters
		default:
			return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, msg)
		}
		// The member's text names the sentinel already ("ops: not
		// primary: member 2; the leader is ..."); another's may not.
		if !strings.Contains(msg, kind.Error()) {
			msg = kind.Error() + ": " + msg
		}
		return &remoteError{kind: kind, msg: msg}
	}
	return json.Unmarshal(b, out)
}
