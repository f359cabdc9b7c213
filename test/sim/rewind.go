package sim

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/wire"
)

// The rewind-stream joiner (with Replayer): once the sequencer's ring has
// evicted the stream's start, a read-only node joins and rewinds from
// seq 1 the way node.Node does over TCP (node/rewind.go): the replayer's
// stored packets, read with a replayer.Reader on its store's Tip (what
// replayer.RewindServer sends, byte for byte), go to Core.StepRewind
// while the live stream runs, and NAKs are off while the rewind is open
// (Core.SetRewindOpen). The stream fails now and then (a reset
// connection; the replayer's crash, which closes its store) and is
// opened again 1-20 ms later from Core.ResumeFrom, as retryRewind does,
// until Core.RewindCaughtUp closes it. Its deliveries are checked like
// every node's (no gap, no repeat, the sequencer's records); at the end
// the rewind must have closed.

// rewindFeed is how many of the Reader's runs (16 KiB at most) one turn
// feeds: a rewind takes many turns, so it fails midway.
const rewindFeed = 1

type simRewind struct {
	n      *simNode
	core   *node.Core // the process the stream feeds (a restart starts over)
	tip    *replayer.Tip
	rd     *replayer.Reader
	openAt int64 // closed after a failure until then
	closed bool  // caught up: the live stream carries the node

	opens, fails int
}

// joinRewinder adds the rewind-stream joiner, once, at seq 900-1700 (the
// stream of a 2000-command run is about twice the sequencer's ring).
func (w *world) joinRewinder() {
	if w.rep == nil || !w.cfg.RewindStream || w.rewinder != nil {
		return
	}
	if w.rewindAt == 0 {
		w.rewindAt = 900 + uint64(w.rng.IntN(800))
	}
	if uint64(len(w.log)) < w.rewindAt {
		return
	}
	n, err := newSimNode(w, len(w.nodes), true, false)
	if err != nil {
		w.fail("rewind-stream joiner: %v", err)
		return
	}
	n.name = fmt.Sprintf("r%d", n.idx)
	w.rewinder = &simRewind{n: n}
	w.nodes = append(w.nodes, n)
}

// work runs one turn of the rewind: open it (again), fail it now and
// then, or feed it.
func (rw *simRewind) work() {
	n, w := rw.n, rw.n.w
	if rw.core != n.core {
		// A new process (the node diverged and was restarted): it
		// rewinds from seq 1 again.
		rw.core, rw.closed, rw.openAt = n.core, false, 0
		rw.drop()
		n.core.SetRewindOpen(true)
	}
	if rw.closed || n.lost != nil || n.core.Err() != nil || !n.core.Started() {
		return // StepRewind needs a live packet first (ErrNotStarted)
	}
	if rw.rd == nil {
		if w.now < rw.openAt || w.rep.svc == nil {
			return
		}
		rw.tip = w.rep.svc.Store().Tip()
		rw.rd = replayer.NewReader(rw.tip, n.core.ResumeFrom(), 16<<10)
		rw.opens++
	}
	if w.rng.IntN(60) == 0 {
		rw.fail() // the connection reset
		return
	}
	for range rewindFeed {
		run, err := rw.rd.Next()
		if err != nil || len(run) == 0 && rw.tip.Closed() {
			rw.fail() // the store closed (the replayer crashed) or failed
			return
		}
		if len(run) == 0 {
			return // at the store's tip: the stream waits
		}
		for len(run) > 0 {
			k := int(binary.LittleEndian.Uint32(run[4:])) + wire.RewindFrameHeaderBytes
			if err := n.core.StepRewind(w.now, run[wire.RewindFrameHeaderBytes:k]); err != nil && n.core.Err() != nil {
				return // receive reports the Core's error
			}
			run = run[k:]
			if n.core.RewindCaughtUp() {
				rw.drop()
				rw.closed = true
				n.core.SetRewindOpen(false)
				return
			}
		}
	}
}

// fail ends the stream; it opens again 1-20 ms later (NAKs stay off
// meanwhile, as in node.Node's retryRewind).
func (rw *simRewind) fail() {
	rw.drop()
	rw.fails++
	rw.openAt = rw.n.w.now + int64(time.Millisecond)*int64(1+rw.n.w.rng.IntN(20))
}

func (rw *simRewind) drop() {
	if rw.rd != nil {
		_ = rw.rd.Close()
		rw.rd, rw.tip = nil, nil
	}
}

// done: the rewind closed (or no joiner joined).
func (rw *simRewind) done() bool { return rw == nil || rw.closed || rw.n.lost != nil }
