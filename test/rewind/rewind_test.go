// Package rewind tests late joins over real sockets and files: a
// sequencer over UDP multicast or TCP on loopback, a replayer's Store fed
// with every packet the sequencer publishes and served by a
// RewindServer, an early node, and a node that joins late, rewinds from
// seq 1 while the stream runs at full rate, and must deliver the same
// stream as the early node, with no gap and no duplicate.
package rewind

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/tcp"
	"github.com/seqd/seqd/wire"
)

// tapServer is the sequencer's transport with a replayer's Store on the
// side: every data packet published is appended (on the sequencer's
// goroutine, as an in-process replayer would), and handed to the OS at
// heartbeats and every few packets, so the RewindServer sees it.
type tapServer struct {
	transport.Server
	store *replayer.Store
	n     int
	start time.Time
	err   atomic.Pointer[error]
}

func (s *tapServer) Publish(frame []byte) error {
	k, _ := wire.PeekKind(frame)
	if k == wire.KindData {
		if err := s.store.Append(frame); err != nil {
			s.err.CompareAndSwap(nil, &err)
		}
		s.n++
	}
	if k == wire.KindHeartbeat || s.n%32 == 0 {
		if err := s.store.Tick(int64(time.Since(s.start))); err != nil {
			s.err.CompareAndSwap(nil, &err)
		}
	}
	return s.Server.Publish(frame)
}

// entry is what a node saw at one seq.
type entry struct {
	account uint64
	cmd     uint64
	epoch   uint32
	crc     uint32
}

type recorder struct {
	name      string
	mu        sync.Mutex
	stream    []entry
	first     uint64 // first seq delivered
	err       error
	rewinding int    // messages delivered while Rewinding()
	switchSeq uint64 // first seq delivered with Rewinding() false
	n         *node.Node
	delivered atomic.Uint64
}

func (r *recorder) OnMessage(m *node.Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.first == 0 {
		r.first = m.Seq
	}
	if want := r.first + uint64(len(r.stream)); m.Seq != want && r.err == nil {
		r.err = fmt.Errorf("%s: seq %d, want %d", r.name, m.Seq, want)
	}
	if r.n != nil {
		if r.n.Rewinding() {
			if r.switchSeq != 0 && r.err == nil {
				r.err = fmt.Errorf("%s: Rewinding() true again at seq %d after the switch at %d", r.name, m.Seq, r.switchSeq)
			}
			r.rewinding++
		} else if r.switchSeq == 0 {
			r.switchSeq = m.Seq
		}
	}
	r.stream = append(r.stream, entry{uint64(m.Account), m.CmdSeq, m.Epoch, crc32.ChecksumIEEE(m.Payload)})
	r.delivered.Store(m.Seq)
}

type transportKind int

const (
	overUDP transportKind = iota
	overTCP
)

type env struct {
	t      *testing.T
	newCl  func() (transport.Client, error)
	agent  *sequencer.Agent
	store  *replayer.Store
	rwAddr string
	tap    *tapServer
}

func groups() multicast.Config {
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	c := multicast.DefaultConfig()
	port := freeport.GroupPortsOr(2, 20000+r.IntN(10000))
	a, b := 1+r.IntN(250), 1+r.IntN(250)
	c.StreamGroup = fmt.Sprintf("239.81.%d.%d:%d", a, b, port)
	c.CommandGroup = fmt.Sprintf("239.82.%d.%d:%d", a, b, port+1)
	return c
}

func freeAddr(t *testing.T) string { return freeport.MustAddr(t) }

// lateJoin runs the scenario: count messages before the late node
// joins, as many again while it rewinds.
func lateJoin(t *testing.T, kind transportKind, count int, epochChange bool) {
	// A bound on a hang, not a speed check: under -race on a loaded 2-core
	// machine the 200k messages of a race run go at 2-5k msg/s (42 s at
	// load ~15, over 120 s at load 35 with the old bound).
	limit := 120 * time.Second
	if raceEnabled {
		limit = 300 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	var srv transport.Server
	var newCl func() (transport.Client, error)
	switch kind {
	case overUDP:
		mc := groups()
		s, err := multicast.NewServer(mc)
		if err != nil {
			t.Skipf("multicast: %v", err)
		}
		srv = s
		newCl = func() (transport.Client, error) { return multicast.NewClient(mc) }
	case overTCP:
		tc := tcp.DefaultConfig()
		tc.Addr = freeAddr(t)
		s, err := tcp.NewServer(tc)
		if err != nil {
			t.Fatal(err)
		}
		srv = s
		newCl = func() (transport.Client, error) { return tcp.Dial(tc) }
	}
	defer srv.Close()

	scfg := replayer.DefaultConfig()
	scfg.Sync = replayer.SyncNone
	scfg.SegmentBytes = 16 << 20 // several rolls during the test
	store, rec, err := replayer.Open(t.TempDir(), scfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(rec)
	tap := &tapServer{Server: srv, store: store, start: time.Now()}

	qcfg := sequencer.DefaultConfig()
	qcfg.Session = 99
	qcfg.Epoch = 1
	qcfg.RingBytes = 2 << 20 // far less than the stream: seq 1 is only in the store
	agent, err := sequencer.NewAgent(qcfg, tap, sequencer.SystemClock())
	if err != nil {
		t.Fatal(err)
	}
	rw, err := replayer.NewRewindServer(store.Tip(), replayer.DefaultRewindConfig())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go rw.Serve(l)

	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	defer func() {
		stop()
		wg.Wait()
		rw.Close()
		store.Close()
	}()
	seqCtx, stopSeq := context.WithCancel(runCtx)
	defer stopSeq()
	seqDone := make(chan struct{})
	wg.Add(1)
	go func() { defer wg.Done(); defer close(seqDone); _ = agent.Run(seqCtx) }()
	lastSeq := agent.LastSeq

	start := func(r *recorder, cfg node.Config, rewindAddr string) {
		cl, err := newCl()
		if err != nil {
			t.Fatal(err)
		}
		n, err := node.New(cfg, r, cl)
		if err != nil {
			t.Fatal(err)
		}
		r.n = n
		if rewindAddr != "" {
			n.SetRewindAddr(rewindAddr)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			if err := n.Run(runCtx); err != nil && !errors.Is(err, context.Canceled) {
				errc <- fmt.Errorf("%s: %w", r.name, err)
			}
		}()
	}

	early := &recorder{name: "early"}
	ecfg := node.DefaultConfig()
	ecfg.ReadOnly = true
	ecfg.Rewind = true // from seq 1: the sequencer's ring still holds it
	start(early, ecfg, "")

	pub := &recorder{name: "pub"}
	pcfg := node.DefaultConfig()
	pcfg.Account = "pub"
	pcfg.Window = 4096
	pcfg.BlockWhenFull = true
	start(pub, pcfg, "")
	total := 2 * count
	var sent atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		p := make([]byte, 256)
		for k := 0; k < total && runCtx.Err() == nil; k++ {
			p[0], p[1], p[2] = byte(k), byte(k>>8), byte(k>>16)
			if _, err := pub.n.SendContext(runCtx, p[:64+k%192]); err != nil {
				if runCtx.Err() == nil {
					errc <- fmt.Errorf("send: %w", err)
				}
				return
			}
			sent.Add(1)
		}
	}()

	wait := func(what string, cond func() bool) {
		t.Helper()
		for !cond() {
			select {
			case err := <-errc:
				t.Fatal(err)
			case <-ctx.Done():
				t.Fatalf("timeout waiting for %s (early at %d)", what, early.delivered.Load())
			case <-time.After(5 * time.Millisecond):
			}
			if p := tap.err.Load(); p != nil {
				t.Fatalf("store: %v", *p)
			}
		}
	}
	if epochChange {
		// A failover midway: the primary stops, a new one takes over its
		// state at the cut (its last seq) as epoch 2, and answers NAKs for
		// the seqs before the cut from the replayer's store.
		wait("a quarter", func() bool { return early.delivered.Load() >= uint64(count/2) })
		stopSeq()
		<-seqDone
		clock := sequencer.SystemClock()
		core1 := agent.Core()
		core1.Flush(clock())
		srv.Flush()
		state := core1.State()
		cut := state.LastSeq()
		qcfg.Epoch = 2
		qcfg.FirstSeq = cut + 1
		qcfg.StartTime = clock().Wall
		var last atomic.Uint64
		last.Store(cut)
		core2, err := sequencer.NewPrimarySinkShell(qcfg, sequencer.ServerSink{Server: tap}, sequencer.Takeover{State: state, History: store})
		if err != nil {
			t.Fatal(err)
		}
		lastSeq = last.Load
		wg.Add(1)
		go func() {
			defer wg.Done()
			serve(runCtx, core2, srv, clock, &last)
		}()
		t.Logf("epoch 2 starts at seq %d", cut+1)
	}
	wait("the first half", func() bool { return early.delivered.Load() >= uint64(count) })

	late := &recorder{name: "late"}
	lcfg := node.DefaultConfig()
	lcfg.ReadOnly = true
	lcfg.Commit(0) // rewind from seq 1
	joinedAt := lastSeq()
	t0 := time.Now()
	start(late, lcfg, l.Addr().String())
	wait("every message sent", func() bool { return sent.Load() == int64(total) })
	last := func() uint64 { return early.delivered.Load() }
	wait("the early node", func() bool { return pub.delivered.Load() >= uint64(total) && last() >= pub.delivered.Load() })
	final := last()
	wait("the late node", func() bool { return late.delivered.Load() >= final })
	el := time.Since(t0)
	wait("the rewind to close", func() bool { return !late.n.RewindOpen() })

	late.mu.Lock()
	defer late.mu.Unlock()
	early.mu.Lock()
	defer early.mu.Unlock()
	if late.err != nil || early.err != nil {
		t.Fatalf("late: %v; early: %v", late.err, early.err)
	}
	if late.first != 1 || early.first != 1 {
		t.Fatalf("first seqs: late %d, early %d, want 1", late.first, early.first)
	}
	n := min(len(late.stream), len(early.stream))
	if uint64(n) < final {
		t.Fatalf("compared only %d messages, want %d", n, final)
	}
	for i := 0; i < n; i++ {
		if late.stream[i] != early.stream[i] {
			t.Fatalf("late and early differ at seq %d: %+v vs %+v", i+1, late.stream[i], early.stream[i])
		}
	}
	st := late.n.Stats()
	t.Logf("late node joined at seq %d, delivered %d in %v (%.0f msg/s); rewound %d packets; %d delivered while rewinding, switched at seq %d; overflow %d, naks %d",
		joinedAt, len(late.stream), el, float64(len(late.stream))/el.Seconds(), st.Rewound, late.rewinding, late.switchSeq, st.Overflow, st.NaksSent)
	if epochChange && (late.stream[0].epoch != 1 || late.stream[n-1].epoch != 2) {
		t.Fatalf("epochs delivered: first %d, last %d; want 1 and 2", late.stream[0].epoch, late.stream[n-1].epoch)
	}
	if late.switchSeq <= joinedAt || uint64(late.rewinding) != late.switchSeq-1 {
		t.Fatalf("switch at seq %d after %d messages rewound, joined at %d", late.switchSeq, late.rewinding, joinedAt)
	}
	if st.Rewound == 0 {
		t.Fatal("nothing came from the rewind")
	}
}

// serve is a minimal sequencer shell for a Core built by NewPrimary
// (sequencer.Agent builds its own): poll, step, flush, tick.
func serve(ctx context.Context, core sequencer.SinkShell, srv transport.Server, clock func() sequencer.Time, last *atomic.Uint64) {
	core.Flush(clock())
	var now sequencer.Time
	step := func(f []byte, from transport.Peer) { _ = core.Step(now, f, from) }
	for ctx.Err() == nil {
		now = clock()
		if _, err := srv.Poll(step, time.Millisecond); err != nil {
			return
		}
		now = clock()
		core.Flush(now)
		core.Tick(now)
		srv.Flush()
		last.Store(core.State().LastSeq())
	}
}

// messages is how many messages the stream holds when the late node
// joins (as many again follow while it rewinds): 1M, fewer under -race
// and across an epoch change (each test stays under ~30 s).
func messages(epochChange bool) int {
	switch {
	case raceEnabled:
		return 100_000
	case epochChange:
		return 300_000
	}
	return 1_000_000
}

// TestLateJoin_UDP: a late joiner over UDP multicast catches up from the
// replayer while the stream runs at full rate.
func TestLateJoin_UDP(t *testing.T) { lateJoin(t, overUDP, messages(false), false) }

// TestLateJoin_TCP: the same over the TCP transport.
func TestLateJoin_TCP(t *testing.T) { lateJoin(t, overTCP, messages(false), false) }

// TestLateJoin_AcrossEpochChange_UDP: the primary fails over midway (epoch
// 2 starts at the old one's last seq + 1); the late joiner rewinds across
// the epoch change and delivers each seq in the epoch the early node did.
func TestLateJoin_AcrossEpochChange_UDP(t *testing.T) { lateJoin(t, overUDP, messages(true), true) }

// TestLateJoin_AcrossEpochChange_TCP: the same over TCP.
func TestLateJoin_AcrossEpochChange_TCP(t *testing.T) { lateJoin(t, overTCP, messages(true), true) }
