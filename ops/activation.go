package ops

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"github.com/seqd/seqd/wire"
)

//	POST /v1/activation?op=activate|force-passive&account=A&instance=I
//	                                 (primary) hot-hot activation change,
//	                                 in the stream: Activation
//	GET  /v1/pairs                   (primary) the hot-hot accounts: []Pair

// ActivationMember is a Member that also carries out hot-hot activation
// changes (cluster.Member is one): op is wire.ControlActivate or
// wire.ControlForcePassive; it returns the seq of the activation record.
type ActivationMember interface {
	Activation(ctx context.Context, op uint8, a wire.Account, instance uint8) (uint64, error)
	HotHotPairs(ctx context.Context) ([]Pair, error)
}

// Pair is one hot-hot account as the primary's state holds it.
type Pair struct {
	Account   string         `json:"account"`
	Active    int            `json:"active"` // the active instance; -1: none
	LastID    uint64         `json:"last_id"`
	Instances []PairInstance `json:"instances"`
}

// PairInstance is one instance of a hot-hot account.
type PairInstance struct {
	Instance    uint8  `json:"instance"`
	Incarnation uint64 `json:"incarnation"`
	LastSeq     uint64 `json:"last_seq"` // seq of its latest record in the stream
}

// Activation is the answer to an activation change.
type Activation struct {
	Account  string `json:"account"`
	Instance uint8  `json:"instance"`
	Op       string `json:"op"`
	Seq      uint64 `json:"seq"` // the activation record's seq
}

// mountActivation serves GET /v1/pairs and POST /v1/activation when the
// member can (ActivationMember): each runs the command of the same
// meaning through the table, behind the surface's guard, as a console
// line would (logged with who asked when it changes something).
func (s *Surface) mountActivation(mux *http.ServeMux) {
	if _, ok := s.member.(ActivationMember); !ok {
		return
	}
	mux.Handle("GET /v1/pairs", s.authed(func(w http.ResponseWriter, r *http.Request, who Caller) {
		legacy(w, r, s, []string{"pairs"}, who)
	}))
	mux.Handle("POST /v1/activation", s.authed(func(w http.ResponseWriter, r *http.Request, who Caller) {
		q := r.URL.Query()
		op := q.Get("op")
		if op != "activate" && op != "force-passive" {
			http.Error(w, "op: want activate or force-passive", http.StatusBadRequest)
			return
		}
		legacy(w, r, s, []string{op, q.Get("account"), q.Get("instance")}, who)
	}))
}

// activationCommands are a hot-hot capable member's pairs, activate and
// force-passive.
func activationCommands(am ActivationMember) []Command {
	change := func(op uint8, name string) func(context.Context, []string) (any, error) {
		return func(ctx context.Context, args []string) (any, error) {
			if len(args) != 2 {
				return nil, fmt.Errorf("%w: %s ACCOUNT INSTANCE", ErrBadArgs, name)
			}
			a, err := wire.ParseAccount(args[0])
			if err != nil {
				return nil, fmt.Errorf("%w: account %q: 1..8 printable ASCII bytes", ErrBadArgs, args[0])
			}
			inst, err := strconv.ParseUint(args[1], 10, 8)
			if err != nil {
				return nil, fmt.Errorf("%w: instance %q: 0..255", ErrBadArgs, args[1])
			}
			seq, err := am.Activation(ctx, op, a, uint8(inst))
			if err != nil {
				return nil, err
			}
			return Activation{Account: a.String(), Instance: uint8(inst), Op: name, Seq: seq}, nil
		}
	}
	return []Command{
		{Name: "pairs", Help: "the hot-hot accounts the primary's state holds: active instance, incarnations, last seqs (on the primary)", Run: func(ctx context.Context, _ []string) (any, error) {
			return am.HotHotPairs(ctx)
		}},
		{Name: "activate", Args: "ACCOUNT INSTANCE", Mutates: true, Help: "make INSTANCE the active instance of hot-hot ACCOUNT, in the stream (on the primary)", Run: change(wire.ControlActivate, "activate")},
		{Name: "force-passive", Args: "ACCOUNT INSTANCE", Mutates: true, Help: "make INSTANCE of hot-hot ACCOUNT passive, in the stream (on the primary)", Run: change(wire.ControlForcePassive, "force-passive")},
	}
}

// RequestActivation asks the primary at addr for an activation change:
// op "activate" or "force-passive" of instance of account.
func RequestActivation(ctx context.Context, addr, op, account string, instance uint8) (Activation, error) {
	return DefaultClient.RequestActivation(ctx, addr, op, account, instance)
}

// FetchPairs asks the primary at addr for the hot-hot accounts.
func FetchPairs(ctx context.Context, addr string) ([]Pair, error) {
	return DefaultClient.FetchPairs(ctx, addr)
}

// RequestActivation asks the primary at addr for an activation change,
// as the command "OP ACCOUNT INSTANCE".
func (c *Client) RequestActivation(ctx context.Context, addr, op, account string, instance uint8) (Activation, error) {
	var a Activation
	_, err := c.Exec(ctx, addr, op+" "+account+" "+strconv.Itoa(int(instance)), &a)
	return a, err
}

// FetchPairs asks the primary at addr for the hot-hot accounts (the
// command "pairs").
func (c *Client) FetchPairs(ctx context.Context, addr string) ([]Pair, error) {
	var ps []Pair
	_, err := c.Exec(ctx, addr, "pairs", &ps)
	return ps, err
}
