package sim

import (
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/seqd/seqd/internal/vfs"
	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/mem"
)

// The replayer member (Config.Replayer): a real replayer.Service driven
// turn by turn (Work) on the simulator's clock. It follows the stream over
// its own mem client, persists it in a replayer.Store on its own vfs.MemFS, and
// answers NAKs on its own mem network (rnet), where every node has a
// client: the nodes' Replayers source 1. The sequencer's ring is small
// (RingBytes), so a node that restarts and rewinds from seq 1, the late
// rewinding joiner, and a node cut off for long enough are answered Gone
// by the sequencer and repaired by the replayer. The replayer crashes now
// and then (its store closed, the process gone; the NAKs sent to it
// meanwhile are lost) and restarts on its directory.

// ringBytesWithReplayer is the sequencer's retransmit ring when a
// replayer runs: 512 KiB, less than most runs publish.
const ringBytesWithReplayer = 512 << 10

type simReplayer struct {
	w       *world
	dir     string       // the store's parent directory on fs
	fs      *vfs.MemFS   // the replayer's disk: kept across its crashes
	net     *mem.Network // the NAK endpoint's network
	srv     transport.Server
	follow  transport.Client
	svc     *replayer.Service
	upAt    int64 // down until then (crashed)
	crashes int
	drop    transport.Handler
	// repairs counts the records the replayer retransmitted (all its
	// incarnations).
	repairs uint64
	// Power losses (Config.PowerLoss) and what the store said was
	// fsynced at the last one (0: checked).
	powerLosses   int
	durableAtLoss uint64
	// Store faults (storefaults.go): the bit flipped while it is down,
	// the flips, the restarts refused for one.
	flip            *storeFlip
	flips, refusals int
}

func newSimReplayer(w *world) (*simReplayer, error) {
	rn, err := mem.NewNetwork(mem.Config{
		Faults:   fault.Config{Loss: w.cfg.Loss, Dup: w.cfg.Dup, Reorder: w.cfg.Reorder, Seed: w.cfg.Seed ^ 0x7e9},
		MaxDelay: w.cfg.MaxDelay,
	})
	if err != nil {
		return nil, err
	}
	dir := fmt.Sprintf("/seqd-sim-r-%d", w.cfg.Seed)
	r := &simReplayer{w: w, dir: dir, fs: vfs.NewMem(), net: rn, srv: rn.Server(), drop: func([]byte, transport.Peer) {}}
	if err := r.start(); err != nil {
		return nil, err
	}
	return r, nil
}

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// start opens the service on the store's directory with a new follow
// client: a new process.
func (r *simReplayer) start() error {
	w := r.w
	cfg := replayer.DefaultServiceConfig()
	cfg.Dir = filepath.Join(r.dir, "store")
	cfg.Store.FS = r.fs
	cfg.Store.SyncInShell = false
	cfg.Store.Sync = replayer.SyncNone
	if w.cfg.PowerLoss {
		cfg.Store.Sync = replayer.SyncInterval // a power loss keeps what was fsynced
	}
	cfg.Store.SegmentBytes = 1 << 20
	cfg.Store.WriteBufferBytes = 128 << 10
	cfg.Store.ReadBufferBytes = 128 << 10
	cfg.Store.Session = 1
	cfg.Receiver.Seed = w.cfg.Seed*13 + uint64(r.crashes)
	cfg.Receiver.ReadOnly = true // flow control does not wait for it
	cfg.Repair.RetransmitBytesPerSecond = w.sc.RetransmitBytesPerSecond * 4
	cfg.Logger = discard
	cfg.Clock = func() int64 { return w.now }
	r.follow = w.net.Client()
	svc, err := replayer.NewService(cfg, r.follow, r.srv)
	if err != nil {
		return fmt.Errorf("replayer: %w", err)
	}
	r.svc = svc
	return nil
}

// crash kills the replayer for downFor; with PowerLoss, one crash in
// two is a power loss: the store keeps only what it fsynced (it must
// reopen on that, every fsynced record still there, and repair the rest).
func (r *simReplayer) crash(downFor int64) {
	var disk *vfs.MemFS
	if r.w.cfg.PowerLoss && r.svc != nil && r.w.rng.IntN(2) == 0 {
		disk = r.fs.CrashClone()
		r.durableAtLoss = r.svc.Store().Durable()
		r.powerLosses++
	}
	if r.svc != nil {
		r.repairs += r.svc.Stats().Naks.Retransmitted
		if err := r.svc.Close(); err != nil {
			r.w.fail("replayer close: %v", err)
		}
		r.svc = nil
	}
	_ = r.follow.Close()
	if disk != nil {
		r.fs = disk
	}
	r.upAt = r.w.now + downFor
	r.crashes++
	r.corruptStore()
}

// work runs one turn of the replayer (or restarts it).
func (r *simReplayer) work() {
	w := r.w
	if r.svc == nil {
		// Down: what reaches its NAK endpoint is lost.
		_, _ = r.srv.Poll(r.drop, 0)
		if w.now >= r.upAt {
			if err := r.restartStore(); err != nil {
				w.fail("%v", err)
				return
			}
			if d := r.durableAtLoss; d != 0 && r.svc != nil {
				r.durableAtLoss = 0
				if got := r.svc.Store().Contiguous(); got < d {
					w.fail("the replayer reopened after a power loss holding up to %d, but it had fsynced up to %d", got, d)
				}
			}
		}
		return
	}
	if w.now >= w.idleUntil && w.rng.IntN(100000) == 0 {
		r.crash(int64(time.Millisecond) * int64(1+w.rng.IntN(10)))
		return
	}
	if err := r.svc.Work(); err != nil {
		w.fail("replayer stopped: %v", err)
	}
}

// done: the replayer holds the whole stream.
func (r *simReplayer) done() bool {
	return r.svc != nil && r.svc.Store().Contiguous() >= uint64(len(r.w.log))
}

// check compares what the store holds with the stream, record by record
// (a fragmented message at its first fragment).
func (r *simReplayer) check() error {
	return storeHolds(r.w, r.svc.Store(), "the replayer")
}

func (r *simReplayer) close() {
	if r.svc != nil {
		r.repairs += r.svc.Stats().Naks.Retransmitted
		_ = r.svc.Close()
		r.svc = nil
	}
}

// SendTo is the node's output to its repair sources: source 1 is the
// replayer's NAK endpoint.
func (n *simNode) SendTo(src receiver.Source, frame []byte) {
	if n.rclient != nil && src == 1 {
		_ = n.rclient.Send(frame)
	}
}

// repairFrame is the handler of a node's client on the replayer's
// network.
func (n *simNode) repairFrame(frame []byte, _ transport.Peer) {
	if err := n.core.StepFrom(n.w.now, frame, 1); err != nil && !n.tolerated(err) {
		n.w.fail("%s rejected a replayer frame: %v", n.name, err)
	}
}
