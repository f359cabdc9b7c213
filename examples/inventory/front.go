package inventory

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/wire"
)

// Sender is what a Front needs of its node (*node.Node has it).
type Sender interface {
	SendContext(ctx context.Context, p []byte) (uint64, error)
}

// Front turns requests into transactions in the stream and answers each
// from the service's reply to it. It is a node.Handler of its own
// account: a gateway node, so that outside input enters the stream and
// every instance of the service sees it. Each request gets one answer:
// the first reply for its ref (a hot-hot pair may send two), or
// ErrTimeout.
type Front struct {
	acct    uint64
	s       Sender
	timeout time.Duration

	nextRef atomic.Uint64
	mu      sync.Mutex
	waiting map[uint64]chan Reply

	replies, duplicates, timeouts atomic.Uint64
}

// NewFront returns a Front that sends as account and waits at most
// timeout for a reply. Attach its node before use.
func NewFront(account string, timeout time.Duration) (*Front, error) {
	a, err := wire.ParseAccount(account)
	if err != nil {
		return nil, err
	}
	f := &Front{acct: uint64(a), timeout: timeout, waiting: make(map[uint64]chan Reply)}
	// Refs above any an earlier life of this account used, so that a
	// late reply to it never answers a new request.
	f.nextRef.Store(uint64(time.Now().UnixNano()))
	return f, nil
}

// Attach gives the Front its node.
func (f *Front) Attach(s Sender) { f.s = s }

// OnMessage takes the replies to this front's transactions.
func (f *Front) OnMessage(m *node.Message) {
	if m.Internal() || !IsReply(m.Payload) {
		return
	}
	var r Reply
	if DecodeReply(m.Payload, &r) != nil || r.Account != f.acct {
		return
	}
	f.mu.Lock()
	ch, ok := f.waiting[r.Ref]
	delete(f.waiting, r.Ref)
	f.mu.Unlock()
	if !ok {
		f.duplicates.Add(1) // the partner's copy, or a request that gave up
		return
	}
	f.replies.Add(1)
	ch <- r // cap 1, one send: never blocks
}

// Do sends one transaction and waits for its reply.
func (f *Front) Do(ctx context.Context, flags uint8, updates ...Update) (Reply, error) {
	ref := f.nextRef.Add(1)
	p, err := AppendTxn(make([]byte, 0, 64), flags, ref, updates...)
	if err != nil {
		return Reply{}, err
	}
	ch := make(chan Reply, 1)
	f.mu.Lock()
	f.waiting[ref] = ch
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if _, err = f.s.SendContext(ctx, p); err == nil {
		select {
		case r := <-ch:
			return r, nil
		case <-ctx.Done():
			err = ErrTimeout
		}
	}
	f.mu.Lock()
	delete(f.waiting, ref)
	f.mu.Unlock()
	select {
	case r := <-ch: // it came as we gave up
		return r, nil
	default:
	}
	f.timeouts.Add(1)
	return Reply{}, err
}

// FrontStats are a Front's counters.
type FrontStats struct {
	Replies    uint64 // requests answered from the stream
	Duplicates uint64 // replies nobody waited for (a pair's second copy)
	Timeouts   uint64
	Waiting    int
}

// Stats reads the counters.
func (f *Front) Stats() FrontStats {
	f.mu.Lock()
	w := len(f.waiting)
	f.mu.Unlock()
	return FrontStats{Replies: f.replies.Load(), Duplicates: f.duplicates.Load(), Timeouts: f.timeouts.Load(), Waiting: w}
}

// Answer is the JSON body of an HTTP answer.
type Answer struct {
	Outcome string `json:"outcome"` // ok, oversold, overflow, malformed, timeout, bad request
	Seq     uint64 `json:"seq,omitempty"`
	Stock   int64  `json:"stock"`
	Error   string `json:"error,omitempty"`
}

// ServeHTTP answers POST /reserve?key=K&qty=N (takes N) and POST
// /restock?key=K&qty=N (adds N), N > 0: 200 when the transaction
// applied, 409 when it was refused (sold out), 504 when no reply came in
// time, 400 for a bad request; the body is an Answer in JSON. A
// successful reservation is an order recorded in the database (unless
// record=0).
func (f *Front) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var sign int64
	switch req.URL.Path {
	case "/reserve":
		sign = -1
	case "/restock":
		sign = 1
	default:
		http.NotFound(w, req)
		return
	}
	q := req.URL.Query()
	key := q.Get("key")
	qty, err := strconv.ParseInt(q.Get("qty"), 10, 64)
	if err != nil || qty <= 0 || len(key) == 0 || len(key) > MaxKeyBytes || req.Method != http.MethodPost {
		writeAnswer(w, http.StatusBadRequest, Answer{Outcome: "bad request", Error: "POST /reserve or /restock with key (1..64 bytes) and qty > 0"})
		return
	}
	var flags uint8
	if sign < 0 && q.Get("record") != "0" {
		flags = FlagRecord
	}
	r, err := f.Do(req.Context(), flags, Update{Key: key, Delta: sign * qty})
	switch {
	case err != nil:
		writeAnswer(w, http.StatusGatewayTimeout, Answer{Outcome: "timeout", Error: err.Error()})
	case r.Outcome == OK:
		writeAnswer(w, http.StatusOK, Answer{Outcome: r.Outcome.String(), Seq: r.Seq, Stock: r.Stock})
	default:
		writeAnswer(w, http.StatusConflict, Answer{Outcome: r.Outcome.String(), Seq: r.Seq, Stock: r.Stock})
	}
}

func writeAnswer(w http.ResponseWriter, code int, a Answer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(a)
}
