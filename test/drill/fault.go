package drill

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/transport"
)

// Fault injection for failover drills (`seqd drill failover`). A member
// started with --fault-addr cuts itself off on request, in its own
// transports: the Raft stream layer (cluster.PartitionLayer: held
// connections closed, dials refused, accepts closed) and its stream
// sockets (the standby's multicast client and the primary's server: every
// datagram sent or received is dropped, as a network that lost them). Its
// control endpoint and fetch server stay reachable, as they would on a
// partition of the data network only; the drill needs the fault endpoint
// to heal it.
//
// The fault endpoint (HTTP, only with --fault-addr; keep it on loopback):
//
//	GET  /v1/fault                       {"partitioned":bool,"loss":f,"dropped":n}
//	POST /v1/fault?partition=1|0         cut the member off / heal it
//	POST /v1/fault?loss=F                drop a fraction F of stream datagrams
//	                                     (seeded by --fault-seed), 0 to stop
//
// A member started without --fault-addr has neither the endpoint nor the
// wrappers.

// Faults is a member's switchable fault injection. A nil *Faults is no
// fault injection: its methods pass everything through.
type Faults struct {
	raft    *cluster.PartitionLayer
	on      atomic.Bool
	loss    atomic.Uint64 // math.Float64bits of the drop fraction
	dropped atomic.Uint64
	mu      sync.Mutex // guards rng
	rng     *rand.Rand
	srv     *http.Server
}

// StartFaults serves the fault endpoint on addr (a member's --fault-addr)
// and puts a PartitionLayer under cfg's Raft; seed seeds the injected
// stream loss. An empty addr is no fault injection: nil, nil. A bad addr
// is a config.Error on the field "FaultAddr".
func StartFaults(addr string, seed uint64, cfg *cluster.MemberConfig, log *slog.Logger) (*Faults, error) {
	if addr == "" {
		return nil, nil
	}
	pl, err := cluster.NewPartitionLayer(cfg.RaftAddr)
	if err != nil {
		return nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		pl.Close()
		return nil, &config.Error{Field: "FaultAddr", Value: addr, Allowed: err.Error(), Err: ErrConfig}
	}
	f := &Faults{raft: pl, rng: rand.New(rand.NewPCG(seed, cfg.ID))}
	cfg.RaftStream = pl
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/fault", f.status)
	mux.HandleFunc("POST /v1/fault", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if v := q.Get("partition"); v != "" {
			on, err := strconv.ParseBool(v)
			if err != nil {
				http.Error(w, "partition: "+err.Error(), http.StatusBadRequest)
				return
			}
			f.on.Store(on)
			pl.SetPartitioned(on)
			log.Warn("fault injection", "partitioned", on)
		}
		if v := q.Get("loss"); v != "" {
			p, err := strconv.ParseFloat(v, 64)
			if err != nil || p < 0 || p > 1 {
				http.Error(w, "loss: want 0..1", http.StatusBadRequest)
				return
			}
			f.loss.Store(math.Float64bits(p))
			log.Warn("fault injection", "loss", p)
		}
		f.status(w, r)
	})
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := f.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("fault endpoint", "err", err)
		}
	}()
	fmt.Printf("sequencer: fault injection on %s (drills only)\n", ln.Addr())
	return f, nil
}

func (f *Faults) status(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"partitioned": f.on.Load(), "loss": math.Float64frombits(f.loss.Load()), "dropped": f.dropped.Load(),
	})
}

// Close stops the fault endpoint.
func (f *Faults) Close() {
	if f != nil {
		f.srv.Close()
	}
}

// drop decides whether one datagram is lost now.
func (f *Faults) drop() bool {
	if f.on.Load() {
		f.dropped.Add(1)
		return true
	}
	p := math.Float64frombits(f.loss.Load())
	if p == 0 {
		return false
	}
	f.mu.Lock()
	d := f.rng.Float64() < p
	f.mu.Unlock()
	if d {
		f.dropped.Add(1)
	}
	return d
}

// server wraps the primary's stream server (nil f: unchanged).
// Server wraps a member's stream server in the switchable faults.
func (f *Faults) Server(s transport.Server) (transport.Server, error) {
	if f == nil {
		return s, nil
	}
	ms, ok := s.(*multicast.Server)
	if !ok {
		s.Close()
		return nil, errors.New("fault injection: the stream is not udp multicast")
	}
	fs := &faultServer{Server: ms, f: f}
	fs.discard = fs.onDiscard
	return fs, nil
}

// client wraps a standby's stream client (nil f: unchanged).
// Client wraps a member's stream client in the switchable faults.
func (f *Faults) Client(c transport.Client) (transport.Client, error) {
	if f == nil {
		return c, nil
	}
	mc, ok := c.(*multicast.Client)
	if !ok {
		c.Close()
		return nil, errors.New("fault injection: the stream is not udp multicast")
	}
	fc := &faultClient{Client: mc, f: f}
	fc.pass = fc.onFrame
	return fc, nil
}

// faultServer drops what the faults say on a multicast.Server, keeping
// its other abilities (Retainer, Stats) by embedding.
type faultServer struct {
	*multicast.Server
	f       *Faults
	h       transport.Handler
	discard transport.Handler // built once
}

func (s *faultServer) Publish(frame []byte) error {
	if s.f.drop() {
		return nil
	}
	return s.Server.Publish(frame)
}

func (s *faultServer) PublishRetained(frame []byte) error {
	if s.f.drop() {
		return nil
	}
	return s.Server.PublishRetained(frame)
}

func (s *faultServer) SendTo(to transport.Peer, frame []byte) error {
	if s.f.drop() {
		return nil
	}
	return s.Server.SendTo(to, frame)
}

func (s *faultServer) Poll(h transport.Handler, wait time.Duration) (int, error) {
	s.h = h
	return s.Server.Poll(s.discard, wait)
}

func (s *faultServer) onDiscard(frame []byte, from transport.Peer) {
	if !s.f.drop() {
		s.h(frame, from)
	}
}

// faultClient is faultServer's twin for a standby's client (Waker,
// Sourcer and Stats kept by embedding).
type faultClient struct {
	*multicast.Client
	f    *Faults
	h    transport.Handler
	pass transport.Handler // built once
}

func (c *faultClient) Send(frame []byte) error {
	if c.f.drop() {
		return nil
	}
	return c.Client.Send(frame)
}

func (c *faultClient) SendTo(to transport.Peer, frame []byte) error {
	if c.f.drop() {
		return nil
	}
	return c.Client.SendTo(to, frame)
}

func (c *faultClient) Poll(h transport.Handler, wait time.Duration) (int, error) {
	c.h = h
	return c.Client.Poll(c.pass, wait)
}

func (c *faultClient) onFrame(frame []byte, from transport.Peer) {
	if !c.f.drop() {
		c.h(frame, from)
	}
}
