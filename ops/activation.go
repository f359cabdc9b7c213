package ops

import (
	"context"
	"net/http"
	"net/url"
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

// registerActivation serves POST /v1/activation when m can.
func registerActivation(mux *http.ServeMux, m Member) {
	am, ok := m.(ActivationMember)
	if !ok {
		return
	}
	mux.HandleFunc("GET /v1/pairs", func(w http.ResponseWriter, r *http.Request) {
		ps, err := am.HotHotPairs(r.Context())
		if err != nil {
			http.Error(w, err.Error(), httpStatus(err))
			return
		}
		writeJSON(w, ps)
	})
	mux.HandleFunc("POST /v1/activation", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var op uint8
		switch q.Get("op") {
		case "activate":
			op = wire.ControlActivate
		case "force-passive":
			op = wire.ControlForcePassive
		default:
			http.Error(w, "op: want activate or force-passive", http.StatusBadRequest)
			return
		}
		a, err := wire.ParseAccount(q.Get("account"))
		if err != nil {
			http.Error(w, "account: 1..8 printable ASCII bytes", http.StatusBadRequest)
			return
		}
		inst, err := strconv.ParseUint(q.Get("instance"), 10, 8)
		if err != nil {
			http.Error(w, "instance: 0..255", http.StatusBadRequest)
			return
		}
		seq, err := am.Activation(r.Context(), op, a, uint8(inst))
		if err != nil {
			http.Error(w, err.Error(), httpStatus(err))
			return
		}
		writeJSON(w, Activation{Account: a.String(), Instance: uint8(inst), Op: q.Get("op"), Seq: seq})
	})
}

// RequestActivation asks the primary at addr for an activation change:
// op "activate" or "force-passive" of instance of account.
func RequestActivation(ctx context.Context, addr, op, account string, instance uint8) (Activation, error) {
	var a Activation
	q := url.Values{"op": {op}, "account": {account}, "instance": {strconv.Itoa(int(instance))}}
	err := call(ctx, adminClient, http.MethodPost, addr, "/v1/activation?"+q.Encode(), nil, &a)
	return a, err
}

// FetchPairs asks the primary at addr for the hot-hot accounts.
func FetchPairs(ctx context.Context, addr string) ([]Pair, error) {
	var ps []Pair
	err := call(ctx, adminClient, http.MethodGet, addr, "/v1/pairs", nil, &ps)
	return ps, err
}
