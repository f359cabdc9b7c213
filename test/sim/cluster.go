package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/cluster/failover"
	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/vfs"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// The sequencer group (Config.Cluster): three members, one primary, two
// standbys. A standby is a real standby.Agent (receiver, replayer.Store
// on files, State, stash, seal, heal) driven step by step (Step, Work) on
// the simulator's clock over its own mem client; the primary's stable is
// a cluster.QuorumAcks over the standbys' acks and what the primary wrote.
// The epoch change is cluster/failover's core, the member's own, driven
// over a simulated Raft and control path (election.go); only the choice
// of the Raft leader is the simulator's (seeded, among the live members).
//
// Faults: the primary is killed (its store survives; it comes back as a
// standby on the same directory, past the cut or not), cut off from its
// standbys (their acks are lost; the standbys see nothing) until it is
// deposed, or cut off from Raft only (it sequences on, its standbys ack
// until sealed); a standby goes down for long as the primary restarts;
// standbys are killed and restarted, partitioned, or lag (they work only
// every few steps), and (PowerLoss) lose power and restart from what
// they fsynced; during an epoch change a member restarts right after
// its seal answer, or answers slowly; a node is partitioned across two
// epoch changes. Commands in flight at the change are resent by the nodes
// to the new primary. After every step the primary's stable must be held
// by a majority (checkStable), and no standby started after a recorded
// seal may ack the sealed epoch (checkSealedAck).

// election is the coordinator: who is primary of which epoch, and the
// members a seal reaches.
type election interface {
	// elect picks the next primary among candidates (member indexes),
	// or false for no election now.
	elect(candidates []int) (int, bool)
}

// seededElection elects a uniformly chosen candidate: any member may win
// (the Raft log says nothing of the stream), and the catch-up makes up
// the difference.
type seededElection struct{ w *world }

func (e seededElection) elect(c []int) (int, bool) {
	if len(c) == 0 {
		return 0, false
	}
	return c[e.w.rng.IntN(len(c))], true
}

// members is the group's size.
const members = 3

type member struct {
	id      uint64
	dir     string         // the store's directory on fs
	fs      *vfs.MemFS     // the member's disk: kept across its crashes
	sb      *standby.Agent // nil: primary or dead
	client  transport.Client
	peer    transport.Peer
	dead    bool
	upAt    int64 // a dead member restarts then
	cutOff  bool  // partitioned from the primary (data path)
	healAt  int64
	lagTill int64 // works only every lagEvery steps until then
	lagK    int
	// noAckEpoch: this process started after the seal of that epoch was
	// recorded, and must never ack it (0: no such seal).
	noAckEpoch uint32
	// heldAtDeath is what its store held of the stream when it died.
	heldAtDeath uint64
	// slowTill: its control answers (seals) are slow until then.
	slowTill int64
	onFrame  transport.Handler
	flip     *storeFlip // a bit flipped in its store while it is down (storefaults.go)
}

type simCluster struct {
	w       *world
	root    string
	m       [members]*member
	primary int // index in m; -1 while none
	acks    *cluster.QuorumAcks
	elect   election
	// own is the primary's store (its Takeover's History): with
	// Config.PrimaryStore the primary appends what it publishes to it
	// before it counts itself in the quorum.
	own sequencer.RetransmitStore
	// selfSealed: the primary, deposed from Raft only, answered a seal
	// with frozen and counts no more toward stable.
	selfSealed bool
	frozen     uint64
	// downAt: the primary died or was cut off then; the election runs
	// at electAt.
	electAt  int64
	isolated bool // the primary is cut off from its standbys until the election
	// deposing: the primary lost Raft (its data path works) and runs
	// until the next epoch starts.
	deposing bool

	// The failover state (a Raft log applied in order), the seal
	// recorded in it, and the epoch change in progress: the core, its
	// leader (a member index), its answers in flight, the standby it
	// took over.
	fst           *fsm.State
	findex        uint64
	sealed        uint64
	ch            *failover.Change
	leader        int
	gen           int
	inbox         []delivery
	taken         *sequencer.Takeover
	elections     int
	electionFault int
	faultAt       int64
	restartAt     int64 // restart member restartM then (0: none)
	restartM      int
	// majoritySince: a majority of the members has been up since then
	// while an epoch change is due (0: not now).
	majoritySince int64
	// span is a node partitioned across two epoch changes (until
	// changes reaches spanTill, or spanMax at the latest).
	span     *simNode
	spanTill int
	spanMax  int64
	spans    int
	quickAt  int64         // the primary fails again then (0: at random)
	st       wire.Status   // scratch for checkSealedAck
	ckpt     *checkpointer // the primary's checkpointer (checkpoint.go)
	// Store faults (storefaults.go): bits flipped in members' stores,
	// members the operator restarted on an empty directory.
	storeFlips, movedAside int
	kills                  int
	changes                int
	restarts               int
	standbyFs              int
	step                   int

	// powerLosses counts the standbys restarted from their CrashClone.
	powerLosses int
}

func newSimCluster(w *world) (*simCluster, error) {
	// Each member's store lives on its own vfs.MemFS, kept across its
	// crashes (a process kill keeps what was written to it).
	root := fmt.Sprintf("/seqd-sim-%d", w.cfg.Seed)
	c := &simCluster{w: w, root: root, primary: 0, elect: seededElection{w}, fst: fsm.Initial()}
	if w.cfg.Checkpoints {
		c.ckpt = newCheckpointer(w.cfg.Seed)
	}
	// The failover state of a bootstrapped group whose member 1 began
	// epoch 1 (what the core does on an empty state: the bootstrap
	// scenario of cluster/failover/testdata).
	cmds := []fsm.Command{fsm.NewSession{}}
	for _, v := range c.voters() {
		cmds = append(cmds, fsm.AddMember{Member: v})
	}
	cmds = append(cmds, fsm.BeginEpoch{Epoch: 1, Primary: 1, PrevCut: 0})
	for _, cmd := range cmds {
		if _, err := c.applyFSM(cmd); err != nil {
			return nil, err
		}
	}
	for i := range c.m {
		m := &member{id: uint64(i + 1), dir: filepath.Join(root, fmt.Sprintf("m%d", i+1)), fs: vfs.NewMem()}
		c.m[i] = m
		if err := c.startStandby(m); err != nil {
			c.close()
			return nil, err
		}
	}
	// The first primary starts the session: it takes over its empty store.
	pm := c.m[c.primary]
	t, err := pm.sb.Takeover(0)
	if err != nil {
		c.close()
		return nil, err
	}
	c.own = t.History
	_ = pm.client.Close()
	pm.client, pm.onFrame = nil, nil
	c.acks = cluster.NewQuorumAcks(cluster.Epoch{Session: 1, Epoch: 1, FirstSeq: 1, Members: c.voters(), Self: 1})
	return c, nil
}

func (c *simCluster) voters() []fsm.Member {
	v := make([]fsm.Member, members)
	for i := range v {
		v[i] = fsm.Member{ID: uint64(i + 1), Role: fsm.Voter, RaftAddr: fmt.Sprintf("m%d", i+1)}
	}
	return v
}

// close closes the stores (the end of a run; their MemFS go with it).
func (c *simCluster) close() {
	for _, m := range c.m {
		if m != nil && m.sb != nil {
			_ = m.sb.Close()
			m.sb = nil
		}
	}
}

// startStandby opens a member's standby on its directory (what it holds
// survives kills) with a new mem client: a new process.
func (c *simCluster) startStandby(m *member) error {
	defer func() {
		if debug && m.sb != nil {
			fmt.Printf("t=%v start m%d held=%d\n", time.Duration(c.w.now), m.id, m.sb.Contiguous())
		}
	}()
	w := c.w
	cfg := standby.DefaultConfig()
	cfg.Member = m.id
	cfg.Session = 1
	cfg.Dir = m.dir
	cfg.MaxSenders = w.sc.MaxSenders
	cfg.AckWritten = true // a process kill keeps what was written
	cfg.Store.FS = m.fs
	cfg.Store.Sync = replayer.SyncNone
	if w.cfg.PowerLoss {
		// A power loss keeps only what was fsynced: ack only that.
		cfg.AckWritten, cfg.Store.Sync = false, replayer.SyncInterval
	}
	cfg.Store.SegmentBytes = 1 << 20 // segments roll often
	cfg.Store.WriteBufferBytes = 128 << 10
	cfg.Store.ReadBufferBytes = 128 << 10
	cfg.AckKeepalive = 10 * time.Millisecond
	// State snapshot files every few records (seeded), so that restarts
	// start from one, and heals and takeovers below them drop them.
	cfg.SnapshotEveryRecords = 8 + w.cfg.Seed%57
	cfg.Clock = func() int64 { return w.now }
	cfg.Receiver.Seed = w.cfg.Seed*7 + m.id + uint64(c.restarts)<<16
	if m.client != nil {
		_ = m.client.Close()
	}
	m.client = w.net.Client()
	m.peer = m.client.(interface{ Peer() transport.Peer }).Peer()
	sb, err := standby.New(cfg, m.client)
	if err != nil {
		return fmt.Errorf("member %d: %w", m.id, err)
	}
	// The failover state tells a member where every epoch began (the
	// Node reads it from Raft).
	for _, c := range w.cuts {
		sb.KnowEpoch(c.epoch+1, c.last+1)
	}
	// A seal recorded in the failover state holds across the restart:
	// the member acks nothing more of the sealed epoch (issue 14 item 7).
	m.noAckEpoch = 0
	if c.sealed != 0 && c.sealed >= uint64(w.epoch) {
		m.noAckEpoch = uint32(c.sealed)
	}
	if c.sealed != 0 && c.sealed >= uint64(w.epoch) {
		if _, err := sb.Seal(uint32(c.sealed)); err != nil {
			_ = sb.Close()
			return fmt.Errorf("member %d: seal %d at start: %w", m.id, c.sealed, err)
		}
	}
	m.sb, m.dead = sb, false
	m.onFrame = sb.Step
	return nil
}

// kill crashes member m's process: its standby (or the store a primary
// kept) is closed, its client gone.
func (c *simCluster) kill(m *member, downFor int64) {
	if debug {
		held := uint64(0)
		if m.sb != nil {
			held = m.sb.Contiguous()
		}
		fmt.Printf("t=%v kill m%d held=%d stable=%d published=%d\n", time.Duration(c.w.now), m.id, held, c.w.seq.Stable(), c.w.seq.Published())
	}
	m.heldAtDeath = 0
	if m.sb != nil {
		m.heldAtDeath = m.sb.Contiguous()
		if e := m.sb.HeldEpoch(); e != 0 && e < c.w.epoch {
			if last, ok := c.w.cutOf(e); ok {
				m.heldAtDeath = min(m.heldAtDeath, last)
			}
		}
		_ = m.sb.Close()
		m.sb = nil
	}
	if m.client != nil {
		_ = m.client.Close()
		m.client = nil
	}
	m.dead, m.upAt, m.cutOff = true, c.w.now+downFor, false
	c.kills++
	c.corruptMember(m)
}

// powerLoss crashes standby m's machine (Config.PowerLoss): the process
// dies as in kill, and its disk keeps only what was fsynced
// (MemFS.CrashClone, taken before the store's Close could flush or sync
// anything). Its acks were of fsynced records only, so what it counted
// toward stable survives and checkStable holds it to that.
func (c *simCluster) powerLoss(m *member, downFor int64) {
	durable := m.sb.Stats().Durable
	disk := m.fs.CrashClone()
	if debug {
		fmt.Printf("t=%v power loss m%d durable=%d\n", time.Duration(c.w.now), m.id, durable)
	}
	c.kill(m, downFor)
	m.heldAtDeath = min(m.heldAtDeath, durable)
	m.fs = disk
	c.powerLosses++
}

// observe sees a frame to the server (the primary's command channel):
// standby acks for the quorum. It reports false when the frame is lost
// on the way (the primary is cut off from its standbys).
func (c *simCluster) observe(frame []byte, from transport.Peer) bool {
	if c.isolated {
		for _, m := range c.m {
			if m.client != nil && m.peer == from {
				return false
			}
		}
	}
	c.checkSealedAck(frame, from)
	c.acks.SetPublished(c.w.seq.Published())
	c.acks.Observe(frame, from)
	return true
}

// checkSealedAck: a standby process started after the seal of epoch e
// was recorded never acks e (or an earlier epoch): its seal holds across
// the restart. Without it, a member restarted between its seal answer
// and the commit acks the sealed epoch to a primary still running, and
// stable can pass the cut (issue 14 item 7).
func (c *simCluster) checkSealedAck(frame []byte, from transport.Peer) {
	if k, err := wire.PeekKind(frame); err != nil || k != wire.KindStatus {
		return
	}
	for _, m := range c.m {
		if m.noAckEpoch == 0 || m.client == nil || m.peer != from {
			continue
		}
		if wire.DecodeStatus(frame, &c.st) == nil && c.st.Flags&wire.StatusStandby != 0 && c.st.Epoch <= m.noAckEpoch {
			c.w.fail("member %d, started after the seal of epoch %d was recorded, acked epoch %d (seq %d)", m.id, m.noAckEpoch, c.st.Epoch, c.st.Contiguous)
		}
	}
}

// persist appends a packet the primary published first to its own store
// (Config.PrimaryStore), so that what it counts as held in the quorum
// survives its crash.
func (c *simCluster) persist(pkt []byte, info sequencer.PacketInfo) {
	if c.w.cfg.PrimaryStore && c.primary >= 0 && c.own != nil {
		c.own.Put(pkt, info)
	}
}

// stable is the primary's stable from the quorum. The primary counts
// only what it wrote (DESIGN.md): with PrimaryStore, all it published
// (each packet is appended as it is published); without, nothing of its
// own epoch.
func (c *simCluster) stable() uint64 {
	self := c.selfPosition()
	if c.selfSealed {
		// Sealed while it runs: it counts no more than it answered.
		self = min(self, c.frozen)
	}
	return c.acks.Stable(self)
}

// selfPosition is what the primary counts toward stable: with
// PrimaryStore, all it published; without, nothing of its own epoch.
func (c *simCluster) selfPosition() uint64 {
	if c.w.cfg.PrimaryStore {
		return c.w.seq.Published()
	}
	return c.w.epochStart - 1
}

// work runs every live standby one turn: its frames, then Work.
func (c *simCluster) work() {
	w := c.w
	c.step++
	for i, m := range c.m {
		if i == c.primary && !m.dead {
			continue
		}
		if m.dead {
			if w.now >= m.upAt && w.err == nil {
				c.restarts++
				if err := c.restartMember(m); err != nil {
					w.fail("%v", err)
				}
			}
			continue
		}
		if m.cutOff && w.now >= m.healAt {
			w.net.Partition(m.peer, false)
			m.cutOff = false
		}
		if m.sb == nil || m.client == nil {
			continue // taken over by the leader of an epoch change
		}
		if w.now < m.lagTill && c.step%m.lagK != 0 {
			continue // a lagging standby: its inbox fills
		}
		if _, err := m.client.Poll(m.onFrame, 0); err != nil {
			w.fail("member %d poll: %v", m.id, err)
			return
		}
		if err := m.sb.Work(); err != nil {
			w.fail("member %d (standby) stopped: %v", m.id, err)
			return
		}
		_ = m.client.Flush()
	}
}

// faults injects the group's faults, and runs the epoch change while one
// is due or in progress.
func (c *simCluster) faults() {
	w := c.w
	c.spanHeal()
	if c.primary < 0 || c.isolated || c.deposing || c.ch != nil {
		c.election()
		return
	}
	// Standbys: kills, partitions, lag (not in idle hours, whose steps
	// are coarse).
	for i, m := range c.m {
		if i == c.primary || m.dead || w.now < w.idleUntil {
			continue
		}
		switch w.rng.IntN(40000) {
		case 0:
			c.kill(m, int64(time.Millisecond)*int64(1+w.rng.IntN(30)))
			c.standbyFs++
		case 1:
			if !m.cutOff {
				w.net.Partition(m.peer, true)
				m.cutOff, m.healAt = true, w.now+int64(time.Millisecond)*int64(1+w.rng.IntN(30))
				c.standbyFs++
			}
		case 2:
			m.lagTill, m.lagK = w.now+int64(time.Millisecond)*int64(5+w.rng.IntN(50)), 2+w.rng.IntN(30)
			c.standbyFs++
		case 3:
			if w.cfg.PowerLoss && m.sb != nil {
				c.powerLoss(m, int64(time.Millisecond)*int64(1+w.rng.IntN(30)))
				c.standbyFs++
			}
		}
	}
	quick := c.quickAt != 0 && w.now >= c.quickAt
	if !w.cfg.EpochChanges || c.changes >= 4 || w.rng.IntN(10000) != 0 && !quick {
		return
	}
	c.quickAt = 0
	// The primary fails. Raft notices after an election timeout.
	c.electAt = w.now + int64(time.Millisecond)*int64(1+w.rng.IntN(5))
	c.spanStart()
	switch w.rng.IntN(6) {
	case 0, 1:
		// Cut off from its standbys (their acks lost, the stream lost
		// to them) until a new leader deposes it.
		if debug {
			fmt.Printf("t=%v isolate primary m%d stable=%d published=%d\n", time.Duration(w.now), c.m[c.primary].id, w.seq.Stable(), w.seq.Published())
		}
		c.isolated = true
		for i, m := range c.m {
			if i != c.primary && !m.dead && !m.cutOff {
				w.net.Partition(m.peer, true)
				m.cutOff, m.healAt = true, c.electAt
			}
		}
		return
	case 2:
		// Cut off from Raft only: it sequences on, its standbys ack,
		// until the sealed quorum stops acking and the next epoch
		// deposes it. A standby restarted in between must not ack the
		// sealed epoch again (the seal is recorded first).
		if debug {
			fmt.Printf("t=%v depose primary m%d (raft only) stable=%d published=%d\n", time.Duration(w.now), c.m[c.primary].id, w.seq.Stable(), w.seq.Published())
		}
		c.deposing = true
		return
	case 3:
		// A standby goes down for long, then the primary restarts
		// (issue 14 items 2 and 11): the old primary's answer must
		// count, or no epoch begins until the standby is back.
		for i, m := range c.m {
			if i != c.primary && !m.dead {
				c.kill(m, int64(time.Millisecond)*int64(30+w.rng.IntN(30)))
				c.standbyFs++
				break
			}
		}
		c.kill(c.m[c.primary], int64(time.Millisecond)*int64(1+w.rng.IntN(2)))
		c.primary, c.own = -1, nil
		c.electAt = w.now + int64(3*time.Millisecond)
		return
	}
	c.kill(c.m[c.primary], int64(time.Millisecond)*int64(1+w.rng.IntN(20)))
	c.primary, c.own = -1, nil
}

// spanStart partitions a node (often a fast one) across the next two
// epoch changes, now and then: it hears none of the epoch between and
// must catch up, or stop with a divergence, when it is back.
func (c *simCluster) spanStart() {
	w := c.w
	if c.span != nil || c.changes > 2 || w.rng.IntN(3) != 0 {
		return
	}
	c.span = w.nodes[w.rng.IntN(len(w.nodes))]
	// Short: the second failover follows the first within milliseconds
	// (quickAt). A long partition's repair storm starves the standbys'
	// and the replayer's repairs until the ring evicts what they lack,
	// and they stop (a defect of its own, left out of this scenario).
	c.spanTill, c.spanMax = c.changes+2, w.now+int64(50*time.Millisecond)
	w.net.Partition(c.span.peer, true)
	c.spans++
	if debug {
		fmt.Printf("t=%v span %s\n", time.Duration(w.now), c.span.name)
	}
}

func (c *simCluster) spanHeal() {
	if c.span != nil && (c.changes >= c.spanTill || c.w.now >= c.spanMax) {
		c.w.net.Partition(c.span.peer, false)
		if debug {
			fmt.Printf("t=%v span %s healed\n", time.Duration(c.w.now), c.span.name)
		}
		c.span = nil
	}
}

// lastStamp is the newest stamp published (cut or not).
func (w *world) lastStamp() int64 {
	if len(w.log) == 0 {
		return 0
	}
	return w.log[len(w.log)-1].time
}

// checkCluster, at the end: every live standby holds the whole stream and
// the primary's State.
func (c *simCluster) check() error {
	w := c.w
	if err := c.checkCheckpoints(); err != nil {
		return err
	}
	last := uint64(len(w.log))
	want := w.seq.State().Snapshot()
	for i, m := range c.m {
		if i == c.primary || m.dead || m.sb == nil {
			continue
		}
		if got := m.sb.Contiguous(); got != last {
			return fmt.Errorf("%w: member %d holds up to %d, the stream is at %d", ErrInvariant, m.id, got, last)
		}
		seq, snap := m.sb.Snapshot()
		if seq != last || string(snap) != string(want) {
			return fmt.Errorf("%w: member %d's State (at %d) differs from the primary's (at %d)", ErrInvariant, m.id, seq, last)
		}
	}
	return nil
}

// done: the group settled (no election pending, every member up and
// holding the whole stream).
func (c *simCluster) done() bool {
	if c.primary < 0 || c.isolated || c.deposing || c.ch != nil || c.span != nil {
		return false
	}
	last := uint64(len(c.w.log))
	for i, m := range c.m {
		if i == c.primary {
			continue
		}
		if m.dead || m.sb == nil || m.sb.Contiguous() < last {
			return false
		}
		if seq, _ := m.sb.Snapshot(); seq < last {
			return false
		}
	}
	return true
}

// startEpoch hands the stream to seq, the primary of the next epoch from
// cut+1: the checker's truth is cut there, fast nodes that delivered past
// it must diverge.
func (w *world) startEpoch(seq sequencer.SinkShell, epoch uint32, cut uint64) {
	for _, n := range w.nodes {
		if n.delivered > cut {
			n.mustDiverge = true
		}
	}
	w.hist.cut(cut)
	w.cuts = append(w.cuts, epochCut{epoch: w.epoch, last: cut, lost: append([]entry(nil), w.log[cut:]...)})
	w.seq, w.epoch, w.epochStart = seq, epoch, cut+1
	w.log = w.log[:cut]
	w.acks = nil
	w.published = false
	st, err := w.stateAt(cut)
	if err != nil {
		w.fail("epoch change at %d: %v", cut, err)
		return
	}
	w.standby = st
	w.checkedSeq = cut
}

func (c *simCluster) progress() string {
	s := fmt.Sprintf("primary=%d isolated=%v stable=%d published=%d", c.primary+1, c.isolated, c.w.seq.Stable(), c.w.seq.Published())
	for _, m := range c.m {
		switch {
		case m.dead:
			s += fmt.Sprintf(" m%d{dead}", m.id)
		case m.sb != nil:
			seq, _ := m.sb.Snapshot()
			s += fmt.Sprintf(" m%d{held=%d applied=%d cutoff=%v err=%v}", m.id, m.sb.Contiguous(), seq, m.cutOff, m.sb.Err())
		}
	}
	return s
}

var debug = os.Getenv("SEQD_SIM_DEBUG") != ""

// checkStable asserts, after every step, that the primary's stable is
// held by a majority of the group: the primary (what it wrote) and each
// standby's store, counted only as far as its records are the stream's
// (a tail of an older epoch counts to that epoch's cut). An ack the
// quorum should not have counted (of an older epoch, of a member
// restarted without its seal) shows here at once, not only when a later
// failover loses the seq.
func (c *simCluster) checkStable() {
	w := c.w
	if c.primary < 0 {
		return
	}
	// The new epoch's stable starts at its cut (sequencer.NewPrimary and
	// cluster.Quorum take the cut as stable by the seal), though the cut
	// may be held by the leader and the highest answer only (one member
	// when they are the same) until the standbys fetch it: a known gap,
	// reported, not checked here.
	if q := c.majorityHeld(); w.seq.Stable() > q {
		w.fail("stable %d of epoch %d is held by no majority (held %v, primary m%d)", w.seq.Stable(), w.epoch, c.held(), c.m[c.primary].id)
	}
}

// held is what each member's store holds of the stream, by the
// simulator's count.
func (c *simCluster) held() [members]uint64 {
	var held [members]uint64
	for i, m := range c.m {
		switch {
		case i == c.primary:
			held[i] = c.primaryHeld()
		case m.dead || m.sb == nil:
			// A dead member's store keeps what it wrote, but it is not
			// open to read here: count it as it was when it died.
			held[i] = m.heldAtDeath
		default:
			held[i] = c.memberHeld(m)
		}
	}
	return held
}

// majorityHeld is the highest seq a majority holds (the current epoch's
// start less one at least: its cut).
func (c *simCluster) majorityHeld() uint64 {
	s := c.held()
	slices.Sort(s[:])
	return max(s[len(s)-(members/2+1)], c.w.epochStart-1)
}

// primaryHeld is what the primary wrote (with PrimaryStore, all it
// published; else nothing of its own epoch).
func (c *simCluster) primaryHeld() uint64 {
	if c.w.cfg.PrimaryStore {
		return c.w.seq.Published()
	}
	return c.w.epochStart - 1
}

// memberHeld is what a live standby holds: its store's contiguous seqs,
// no further than the cut of the epoch it holds when that epoch ended.
func (c *simCluster) memberHeld(m *member) uint64 {
	h := m.sb.Contiguous()
	if e := m.sb.HeldEpoch(); e != 0 && e < c.w.epoch {
		if last, ok := c.w.cutOf(e); ok {
			h = min(h, last)
		}
	}
	return h
}
