package sim

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/seqd/seqd/node"
)

// TestSim_Seeds runs a few seeds under the race detector; `make sim` runs
// hundreds without it.
func TestSim_Seeds(t *testing.T) {
	n := 3
	if testing.Short() {
		n = 1
	}
	for s := 1; s <= n; s++ {
		cfg := DefaultConfig()
		cfg.Seed = uint64(s)
		cfg.Commands = 2000
		r := Run(cfg)
		if r.Err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", s, r.Err, r.Replay())
		}
		if r.Commands != uint64(cfg.Commands) {
			t.Fatalf("seed %d: %d commands issued, want %d", s, r.Commands, cfg.Commands)
		}
		t.Logf("seed %d: steps=%d virtual=%v sequenced=%d", s, r.Steps, r.Virtual, r.Sequenced)
	}
}

// regressionSeeds failed once (`make sim SEEDS=2000`); each runs here
// with the command count it failed with.
var regressionSeeds = []struct {
	seed     uint64
	commands int
	why      string
}{
	// A standby healed onto epoch 3 on its second packet while its
	// store held the deposed epoch-2 primary's records 480..481; epoch
	// 4's first packet followed them, the store's epoch table skipped
	// epoch 3, and as the epoch-5 primary it served seq 480 of epoch 2
	// stamped stable 752: a safe node delivered a cut record.
	{1457, 2000, "a safe node delivered seq 480 of epoch 2, which the epoch change cut"},
	// With history packets stamped only as far as the store's epoch
	// table knew their epoch's end (1457's fix, first cut): epoch 4
	// published only 1176 and was cut at 1175, the epoch-5 primary's
	// store jumped from epoch 3 to 5, and its epoch-3 packets went with
	// their stored (lagging) stable: three nodes waited at 810 forever.
	{75, 2000, "no convergence: nodes stayed at seq 810"},
}

// TestSim_RegressionSeeds runs the seeds that once failed.
func TestSim_RegressionSeeds(t *testing.T) {
	for _, rs := range regressionSeeds {
		cfg := DefaultConfig()
		cfg.Seed, cfg.Commands = rs.seed, rs.commands
		if r := Run(cfg); r.Err != nil {
			t.Errorf("seed %d (once: %s): %v\nreplay: %s", rs.seed, rs.why, r.Err, r.Replay())
		}
	}
}

// TestSim_SameSeedSameRun: the simulator is deterministic.
func TestSim_SameSeedSameRun(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 7
	cfg.Commands = 1000
	a, b := Run(cfg), Run(cfg)
	if a.Err != nil || b.Err != nil {
		t.Fatalf("errors: %v / %v", a.Err, b.Err)
	}
	if a.Steps != b.Steps || a.Sequenced != b.Sequenced || a.Virtual != b.Virtual {
		t.Fatalf("seed 7 ran differently: %+v vs %+v", a, b)
	}
}

// TestSim_CheckerCatchesCorruption: a checker that cannot fail is no
// checker. Corrupt the sequencer's truth and expect a violation.
func TestSim_CheckerCatchesCorruption(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 3
	cfg.Commands = 500
	w2, err := newWorld(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// Run until something was published, then flip one recorded command.
	for i := 0; i < 1000 && len(w2.log) < 50; i++ {
		w2.now += int64(tick)
		w2.net.SetNow(w2.now)
		for _, n := range w2.nodes {
			n.work()
		}
		w2.srv.Poll(w2.onServerFrame, 0)
		w2.seq.Flush(w2.seqClock())
	}
	if len(w2.log) < 50 {
		t.Fatal("nothing sequenced")
	}
	w2.log[len(w2.log)-1].cmdSeq += 1000
	if _, err := w2.run(); err == nil {
		t.Fatal("checker accepted a stream that differs from the sequencer's")
	}
}

// TestSim_CheckerCatchesBadDeliveries: the node-side checks catch a
// skipped delivery, a double delivery and two swapped messages.
func TestSim_CheckerCatchesBadDeliveries(t *testing.T) {
	for _, tc := range []struct {
		name string
		kind tamperKind
	}{{"skip", tamperSkip}, {"twice", tamperTwice}, {"swap", tamperSwap}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Seed = 5
			cfg.Commands = 600
			w, err := newWorld(cfg)
			if err != nil {
				t.Fatal(err)
			}
			// A node in safe mode and one in fast mode, at an
			// application message well inside the run.
			for _, n := range w.nodes[:2] {
				n.tamper, n.tamperAt = tc.kind, 120
			}
			_, err = w.run()
			if !errors.Is(err, ErrInvariant) {
				t.Fatalf("run with a %s delivery ended with %v, want an invariant violation", tc.name, err)
			}
			t.Log(err)
		})
	}
}

// TestSim_ReadOnlyNodeBehindTheRingGetsGone: a read-only node cut off for
// longer than the sequencer's ring holds is not waited for (flow control
// ignores read-only receivers): when it returns, the sequencer answers its
// NAK with Gone and it stops with ErrUnrecoverable naming the range it
// lacks, from the first seq it did not deliver; the other nodes finish.
func TestSim_ReadOnlyNodeBehindTheRingGetsGone(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Seed = 11
	cfg.Commands = 6000
	cfg.RingBytes = 1 << 20 // a few thousand messages
	cfg.Partitions, cfg.Restarts, cfg.LateJoiner, cfg.IdleHours, cfg.EpochChanges, cfg.Cluster, cfg.Replayer = false, false, false, false, false, false, false
	w, err := newWorld(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := w.nodes[cfg.Senders] // the read-only node
	n.mayLose = true
	for len(w.log) < 5000 && w.err == nil {
		if len(w.log) >= 500 && n.delivered > 0 {
			w.net.Partition(n.peer, true)
		}
		w.now += int64(tick)
		w.net.SetNow(w.now)
		for _, m := range w.nodes {
			m.work()
		}
		w.srv.Poll(w.onServerFrame, 0)
		w.seq.Flush(w.seqClock())
		w.standbys()
		w.seq.Tick(w.seqClock())
		for _, m := range w.nodes {
			m.receive()
		}
	}
	cutAt := n.delivered
	if cutAt == 0 || cutAt > 1000 {
		t.Fatalf("the node delivered %d before the cut-off; the test needs some, not all", cutAt)
	}
	w.net.Partition(n.peer, false)
	if _, err := w.run(); err != nil {
		t.Fatalf("run: %v", err)
	}
	if !errors.Is(n.lost, node.ErrUnrecoverable) {
		t.Fatalf("the cut-off node ended with %v, want ErrUnrecoverable", n.lost)
	}
	if want := fmt.Sprintf("seqs %d..", cutAt+1); !strings.Contains(n.lost.Error(), want) {
		t.Fatalf("error %q does not name the range from %d", n.lost, cutAt+1)
	}
	if w.seq.Stats().Gones == 0 {
		t.Fatal("no Gone was sent")
	}
	t.Log(n.lost)
}

// TestSim_PowerLoss runs seeds whose standbys ack what they fsynced and
// now and then lose power (Config.PowerLoss): every restart from a
// CrashClone must keep what the member acked, or checkStable and the
// stream checks fail.
func TestSim_PowerLoss(t *testing.T) {
	losses := 0
	for s := uint64(1); s <= 2; s++ {
		cfg := DefaultConfig()
		cfg.Seed, cfg.Commands, cfg.PowerLoss = s, 2000, true
		r := Run(cfg)
		if r.Err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", s, r.Err, r.Replay())
		}
		losses += r.PowerLosses
	}
	if losses == 0 {
		t.Fatal("no standby lost power: the fault is not exercised")
	}
}

// TestSim_StoreFaults runs seeds with bits flipped in the replayer's and
// the members' stores while they are down (Config.StoreFaults): a store
// that opens must no longer hold the byte, one that refuses is restored
// (the replayer) or moved aside for an empty directory that fetches the
// stream from the other members (a member), and every store ends equal to
// the stream.
func TestSim_StoreFaults(t *testing.T) {
	var refused, movedAside int
	for s := uint64(1); s <= 4; s++ {
		cfg := DefaultConfig()
		cfg.Seed, cfg.Commands, cfg.StoreFaults = s, 2000, true
		r := Run(cfg)
		if r.Err != nil {
			t.Fatalf("seed %d: %v\nreplay: %s", s, r.Err, r.Replay())
		}
		refused += r.StoreRefusals
		movedAside += r.MembersMovedAside
	}
	if refused == 0 || movedAside == 0 {
		t.Fatalf("replayer restarts refused %d, members moved aside %d: a store fault is not exercised", refused, movedAside)
	}
}

// TestSim_HotHot runs seeds with a hot-hot pair whose active instance is
// killed, paused and cut off while the sequencer group fails over: after
// every step the pair's sequenced commands are exactly its handler's
// sends, each once, from the active instance; at the end every order is
// answered and the instances agree.
func TestSim_HotHot(t *testing.T) {
	pairFaults := 0
	for seed := uint64(1); seed <= 4; seed++ {
		cfg := DefaultConfig()
		cfg.Seed, cfg.Commands = seed, 2000
		cfg.HotHot, cfg.Replayer, cfg.IdleHours = true, false, false
		r := Run(cfg)
		if r.Err != nil {
			t.Fatalf("seed %d: %v\n  replay: %s", seed, r.Err, r.Replay())
		}
		pairFaults += r.PairKills + r.PairPauses + r.PairPartitions
		t.Logf("seed %d: pair kills=%d pauses=%d partitions=%d switches=%d fenced=%d epochs=%d",
			seed, r.PairKills, r.PairPauses, r.PairPartitions, r.Sequencer.ActivationSwitch, r.Sequencer.RejectedNotActive, r.EpochChanges)
	}
	if pairFaults == 0 {
		t.Fatal("no fault of the pair in four seeds: the test tests nothing")
	}
}
