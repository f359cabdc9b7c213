package ops

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"

	"github.com/seqd/seqd/fsm"
)

// A member's admin surface is a Surface (surface.go) with the member's
// commands (MemberSurface), and, for clients of older versions, these
// routes, which run the same commands:
//
//	POST /v1/transfer?to=ID          (primary) hand the primary role to ID
//	                                 (0: any standby): Handover
//	POST /v1/members                 (primary) add a voter: Peer JSON
//	DELETE /v1/members?id=ID         (primary) remove a member
//
// Their errors answer with a status other than 200 and the error's text.
// Members talk to each other on their peer port, never here.

// Member is what the admin endpoint asks of a sequencer cluster member
// (cluster.Member is one). Each method is safe from any goroutine.
type Member interface {
	// Status is the member's view of the cluster.
	Status() MemberStatus
	// TransferPrimary hands the primary role to member to (0: any
	// standby) with nothing lost; ErrNotPrimary on a standby.
	TransferPrimary(ctx context.Context, to uint64) (Handover, error)
	// AddMember adds m as a voter, live (the primary only).
	AddMember(m fsm.Member) error
	// RemoveMember removes member id, live (the primary only; never
	// below three voters: ErrTooFewVoters).
	RemoveMember(id uint64) error
}

// MemberStatus is one member's view, for `seqd admin status` (GET
// /v1/status of a member, and the "member" section of its ProcessStatus).
type MemberStatus struct {
	ID         uint64  `json:"id"`
	Role       string  `json:"role"`
	RaftState  string  `json:"raft_state"`
	Term       uint64  `json:"term"`
	Leader     uint64  `json:"leader"`
	Session    uint64  `json:"session"`
	Epoch      uint64  `json:"epoch"`
	Primary    uint64  `json:"primary"`
	EpochStart uint64  `json:"epoch_start"`
	Applied    uint64  `json:"applied_index"`
	Stable     uint64  `json:"stable,omitempty"`     // primary only
	Published  uint64  `json:"published,omitempty"`  // primary only
	Contiguous uint64  `json:"contiguous"`           // what this member's standby holds
	StartedAt  int64   `json:"started_at,omitempty"` // wall ns of its current or last epoch's first record
	StoppedAt  int64   `json:"stopped_at,omitempty"` // wall ns its last primary loop ended
	Change     *Change `json:"last_change,omitempty"`
	Members    []Peer  `json:"members"`
	// LastContactNS is how long ago (ns) a standby last heard from the
	// Raft leader (0 on the leader, or never).
	LastContactNS int64 `json:"last_contact_ns,omitempty"`
}

// Change is the timing of the last epoch change a member led, in
// microseconds from becoming Raft leader.
type Change struct {
	Epoch      uint64 `json:"epoch"`
	Cut        uint64 `json:"cut"`
	SealUS     int64  `json:"seal_us"`      // seal answered by a quorum
	CatchUpUS  int64  `json:"catchup_us"`   // holds 1..cut
	CommitUS   int64  `json:"commit_us"`    // BeginEpoch committed
	BarrierUS  int64  `json:"barrier_us"`   // every committed entry applied
	TakeoverUS int64  `json:"takeover_us"`  // standby stopped, its State and store taken
	OpenUS     int64  `json:"open_us"`      // stream transport open, Core built
	StartedUS  int64  `json:"started_us"`   // first record of the epoch published
	LeaderAtNS int64  `json:"leader_at_ns"` // wall clock when it became leader
}

// Handover is the outcome of a planned transfer of the primary role.
type Handover struct {
	From    uint64 `json:"from"`
	To      uint64 `json:"to"`
	Epoch   uint64 `json:"epoch"` // the new primary's epoch
	Cut     uint64 `json:"cut"`
	PauseUS int64  `json:"pause_us"` // old primary's last loop to the new one's first record
}

// AdminHandler serves the admin surface of m (MemberSurface) to callers
// on loopback only: a member started without an admin token.
func AdminHandler(m Member) http.Handler { return MemberSurface(m, Auth{}).Handler() }

// mountMember adds the routes of the member's first admin API (before the
// command language), for clients of older versions; each goes through
// the command table like a console line.
func (s *Surface) mountMember(mux *http.ServeMux) {
	mux.Handle("POST /v1/transfer", s.authed(func(w http.ResponseWriter, r *http.Request, who Caller) {
		args := []string{"transfer-primary"}
		if to := r.URL.Query().Get("to"); to != "" && to != "0" {
			args = append(args, to)
		}
		legacy(w, r, s, args, who)
	}))
	mux.Handle("POST /v1/members", s.authed(func(w http.ResponseWriter, r *http.Request, who Caller) {
		var p Peer
		if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		m := p.Member()
		spec := strconv.FormatUint(m.ID, 10) + "@" + m.RaftAddr + "@" + m.AdminAddr
		if m.StreamAddr != "" {
			spec += "@" + m.StreamAddr
		}
		legacy(w, r, s, []string{"add-member", spec}, who)
	}))
	mux.Handle("DELETE /v1/members", s.authed(func(w http.ResponseWriter, r *http.Request, who Caller) {
		id := r.URL.Query().Get("id")
		if _, err := strconv.ParseUint(id, 10, 64); err != nil {
			http.Error(w, "id: "+err.Error(), http.StatusBadRequest)
			return
		}
		legacy(w, r, s, []string{"remove-member", id}, who)
	}))
	s.mountActivation(mux)
}

// legacy runs words and answers the result itself as JSON, or the error
// as text with its status.
func legacy(w http.ResponseWriter, r *http.Request, s *Surface, words []string, who Caller) {
	res, err := s.run(r.Context(), words, who)
	if err != nil {
		http.Error(w, err.Error(), httpStatus(err))
		return
	}
	writeJSON(w, res)
}

// httpStatus is the status an error of m answers with; the client maps
// it back (call).
func httpStatus(err error) int {
	if st, ok := errorStatus(err); ok {
		return st
	}
	switch {
	case errors.Is(err, ErrTooFewVoters):
		return http.StatusPreconditionFailed
	case errors.Is(err, ErrNotPrimary):
		return http.StatusMisdirectedRequest
	case errors.Is(err, ErrUnknownMember):
		return http.StatusNotFound
	case errors.Is(err, ErrAlreadyPrimary):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v) // a client that went away is its own problem
}
