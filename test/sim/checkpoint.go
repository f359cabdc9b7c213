package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seqd/seqd/cluster/failover"
	"github.com/seqd/seqd/fsm"
)

// The primary's checkpointer (Config.Checkpoints, with Cluster), as
// cluster.Member runs it: every 2-8 ms of virtual time, while the primary
// leads Raft (no epoch change in progress, not deposed or cut off) and
// stable moved past the last checkpoint, it proposes
// fsm.AddCheckpoint{epoch, seq, stamp} with seq = min(stable,
// failover.CheckpointBound(voters, held)), held what each member the
// primary reaches holds (its own: what it wrote), never the stream's
// acks. The commit lands a commit delay later, behind whatever the epoch
// change proposed meanwhile (the FSM refuses a stale one, ErrStaleEpoch,
// as it does the member's). A checkpoint may still end up above what a
// majority holds: a standby that crashes loses what its store had not
// written yet, and a dead primary's store is out of reach. Checked at
// every epoch start and at the end: each checkpoint lies at or below the
// surviving stream's end (BeginEpoch refuses a cut below the latest, so
// the core must drop those above a sealed epoch's cut: failover
// PhaseDropping) and names that record's time (a checkpoint of a seq the
// cut removed, re-sequenced in the new epoch, would name another); every
// epoch change must get past them within the election bounds the cluster
// checks already.

type checkpointer struct {
	rng      *rand.Rand // its own: its timing leaves the run's draws alone
	next     int64      // virtual time of the next look
	pending  *fsm.AddCheckpoint
	commitAt int64
	overshot bool            // pending is above the bound
	forged   map[uint64]bool // the overshoots' seqs: their stamps are made up

	recorded, refused, overshoots int
	dropped                       int // DropCheckpoints the cores proposed
}

func newCheckpointer(seed uint64) *checkpointer {
	return &checkpointer{rng: rand.New(rand.NewPCG(seed, 0xc4ec4)), forged: map[uint64]bool{}}
}

// checkpoint runs the checkpointer's turn: commit the proposal in flight
// when its time came, or propose the next.
func (c *simCluster) checkpoint() {
	w, k := c.w, c.ckpt
	if k == nil {
		return
	}
	if p := k.pending; p != nil {
		if w.now < k.commitAt {
			return
		}
		k.pending = nil
		if _, err := c.applyFSM(*p); err != nil {
			k.refused++ // a stale epoch, or not above the last: the member logs it
			return
		}
		k.recorded++
		if k.overshot && c.quickAt == 0 {
			// The primary fails right away, before its standbys can
			// catch up with the checkpoint it overshot to.
			c.quickAt = w.now
		}
		return
	}
	if w.now < k.next || c.primary < 0 || c.ch != nil || c.deposing || c.isolated || c.m[c.primary].dead {
		return
	}
	k.next = w.now + int64(2*time.Millisecond) + k.rng.Int64N(int64(6*time.Millisecond))
	stable := w.seq.Stable()
	last, ok := c.fst.LastCheckpoint()
	if stable == 0 || ok && stable <= last.Seq {
		return
	}
	voters := 0
	for _, m := range c.fst.Members() {
		if m.Role == fsm.Voter {
			voters++
		}
	}
	var held []uint64
	for i, m := range c.m {
		switch {
		case i == c.primary:
			held = append(held, c.primaryHeld())
		case !m.dead && m.sb != nil && !m.cutOff:
			held = append(held, c.memberHeld(m))
		}
	}
	seq := min(stable, failover.CheckpointBound(voters, held))
	stamp := w.stampAt(seq)
	if w.cfg.EpochChanges && c.changes < 4 && k.rng.IntN(20) == 0 {
		// Past anything published, as forged standby acks once made it
		// (issue 16: every later leader failed "cut is below a recorded
		// checkpoint" for ten minutes): no member holds it, and the
		// next epoch change must drop it.
		seq = w.seq.Published() + 1 + k.rng.Uint64N(50)
		stamp = w.stampAt(w.seq.Published())
		k.overshoots++
		k.forged[seq] = true
	}
	k.overshot = seq > failover.CheckpointBound(voters, held)
	if seq == 0 || ok && seq <= last.Seq {
		return
	}
	k.pending = &fsm.AddCheckpoint{Epoch: uint64(w.epoch), Seq: seq, UnixNano: stamp}
	k.commitAt = w.now + int64(100*time.Microsecond) + k.rng.Int64N(int64(400*time.Microsecond))
}

// checkCheckpoints: every checkpoint recorded lies within the surviving
// stream (at or below the current epoch's start less one, or published
// in it) and carries that record's time (but an overshoot, whose time was
// made up with it, and which the primary may have published up to
// before it failed).
func (c *simCluster) checkCheckpoints() error {
	w := c.w
	for _, cp := range c.fst.Checkpoints() {
		if cp.Seq > uint64(len(w.log)) {
			return fmt.Errorf("%w: checkpoint %d is past the stream's end %d (epoch %d from %d)", ErrInvariant, cp.Seq, len(w.log), w.epoch, w.epochStart)
		}
		if t := w.log[cp.Seq-1].time; cp.UnixNano != t && !c.ckpt.forged[cp.Seq] {
			return fmt.Errorf("%w: checkpoint %d says time %d, the record's is %d", ErrInvariant, cp.Seq, cp.UnixNano, t)
		}
	}
	return nil
}
