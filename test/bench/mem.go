package bench

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/test/check"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

// benchReceiver verifies the stream it delivers with test/check: dense
// seqs from 1 and each sender's commands once, in order, and no message
// from an account that is not one of the bench's senders.
type benchReceiver struct {
	stream   *check.Stream
	msgs     int
	accounts []wire.Account // the senders'
	err      error
}

func (r *benchReceiver) OnMessage(m *node.Message) {
	if v := r.stream.Observe(m); v.Fault != check.OK && r.err == nil {
		r.err = fmt.Errorf("bench: receiver: %w", v.Err())
	}
	if m.Internal() {
		return
	}
	for _, a := range r.accounts {
		if a == m.Account {
			r.msgs++
			return
		}
	}
	if r.err == nil {
		r.err = fmt.Errorf("bench: message from unknown account %v", m.Account)
	}
}

type benchSender struct{}

func (benchSender) OnMessage(*node.Message) {}

// clientOut hands a node core's frames to its mem client.
type clientOut struct{ c transport.Client }

func (o clientOut) Send(f []byte) { _ = o.c.Send(f) }

// memFrameBytes is the largest frame the bench puts on the mem network.
const memFrameBytes = 65507

// benchMem runs the sequencer, the senders and one receiving node on one
// goroutine over the mem transport: the cost of the protocol itself,
// without system calls.
func benchMem(o Config) error {
	net, err := mem.NewNetwork(mem.Config{})
	if err != nil {
		return err
	}
	srv := net.Server()
	scfg := sequencer.DefaultConfig()
	scfg.Session = 1
	scfg.Epoch = 1
	// The mem transport's "path MTU" is its frame limit: batch up to it,
	// as the udp bench batches up to the interface MTU.
	scfg.MaxPacketBytes = memFrameBytes
	scfg.RingBytes = 256 << 20
	seq, err := sequencer.NewSinkShell(scfg, sequencer.ServerSink{Server: srv})
	if err != nil {
		return err
	}
	// One clock reading per round, shared by every frame of the round.
	clock := sequencer.SystemClock()
	snow := clock()
	onSrv := func(f []byte, from transport.Peer) { _ = seq.Step(snow, f, from) }

	recv := &benchReceiver{stream: check.New(check.Config{FirstSeq: 1})}
	type peer struct {
		client  transport.Client
		core    *node.Core
		handler transport.Handler
	}
	var peers []peer
	now := time.Now().UnixNano()
	for i := 0; i <= o.Nodes; i++ {
		cfg := node.DefaultConfig()
		cfg.Account = fmt.Sprintf("B%d", i)
		cfg.Rewind = true // the receiver checks the stream from seq 1
		cfg.Incarnation = 1
		var h node.Handler = benchSender{}
		if i == o.Nodes {
			cfg.Account = "RECV"
			cfg.ReadOnly = true
			h = recv
		} else {
			recv.accounts = append(recv.accounts, wire.MustAccount(cfg.Account))
		}
		cfg.Window = 4096
		cfg.MaxPacketBytes = memFrameBytes
		if one := wire.CommandHeaderBytes + wire.CommandRecordBytes + o.SizeBytes; !o.Batch && one <= memFrameBytes {
			cfg.MaxPacketBytes = one
		}
		cl := net.Client()
		core, err := node.NewCore(cfg, h, clientOut{cl})
		if err != nil {
			return err
		}
		p := peer{client: cl, core: core}
		p.handler = func(f []byte, _ transport.Peer) { _ = core.Step(now, f) }
		peers = append(peers, p)
	}
	payload := make([]byte, o.SizeBytes)
	perNode := o.Count / o.Nodes
	total := perNode * o.Nodes
	sent := make([]int, o.Nodes)

	var ms0, ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	start := time.Now()
	deadline := start.Add(5 * time.Minute)
	for rounds := 0; recv.msgs < total; rounds++ {
		snow = clock()
		now = snow.Wall
		for i := 0; i < o.Nodes; i++ {
			c := peers[i].core
			for k := 0; k < 64 && sent[i] < perNode; k++ {
				if _, err := c.Send(now, payload); err != nil {
					if errors.Is(err, node.ErrWindowFull) {
						break
					}
					return err
				}
				sent[i]++
			}
			c.Flush(now)
		}
		if _, err := srv.Poll(onSrv, 0); err != nil {
			return err
		}
		seq.Flush(snow)
		for i := range peers {
			if _, err := peers[i].client.Poll(peers[i].handler, 0); err != nil {
				return err
			}
			if rounds%64 == 0 {
				peers[i].core.Tick(now)
			}
		}
		if recv.err != nil {
			return recv.err
		}
		if rounds%1024 == 0 && time.Now().After(deadline) {
			return fmt.Errorf("bench: stalled: received %d of %d", recv.msgs, total)
		}
	}
	elapsed := time.Since(start)
	runtime.ReadMemStats(&ms1)
	allocs := float64(ms1.Mallocs-ms0.Mallocs) / float64(total)
	_, err = fmt.Fprintf(o.Out, "bench transport=mem mode=tput size=%d nodes=%d msgs=%d rate=%.0f msg/s allocs_per_msg=%.4f\n",
		o.SizeBytes, o.Nodes, total, float64(total)/elapsed.Seconds(), allocs)
	return err
}
