package sim

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
)

// The sequencer group (Config.Cluster): three members, one primary, two
// standbys. A standby is a real standby.Agent (receiver, replayer.Store
// on files, State, stash, seal, heal) driven step by step (Step, Work) on
// the simulator's clock over its own mem client; the primary's stable is
// a cluster.QuorumAcks over the standbys' acks. The epoch change runs
// behind a small coordinator (election): the simulated one below picks a
// leader among the live members (seeded), seals a quorum, takes the
// highest contiguous seq reported as the cut, catches the leader up
// from the others (CatchUpFrom), and starts the next epoch with
// sequencer.NewPrimary on the leader's Takeover, as cluster.Node does
// over hashicorp/raft.
//
// Faults: the primary is killed (its store survives; it comes back as a
// standby on the same directory, past the cut or not), or cut off from
// its standbys (their acks are lost; the standbys see nothing) until it
// is deposed; standbys are killed and restarted, partitioned, or lag
// (they work only every few steps). Commands in flight at the change are
// resent by the nodes to the new primary.

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
	dir     string
	sb      *standby.Agent // nil: primary or dead
	client  transport.Client
	peer    transport.Peer
	dead    bool
	upAt    int64 // a dead member restarts then
	cutOff  bool  // partitioned from the primary (data path)
	healAt  int64
	lagTill int64 // works only every lagEvery steps until then
	lagK    int
	onFrame transport.Handler
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
	// downAt: the primary died or was cut off then; the election runs
	// at electAt.
	electAt   int64
	isolated  bool // the primary is cut off from its standbys until the election
	kills     int
	changes   int
	restarts  int
	standbyFs int
	step      int
}

func newSimCluster(w *world) (*simCluster, error) {
	base := os.Getenv("SEQD_SIM_DIR")
	if base == "" {
		if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
			base = "/dev/shm" // the stores' files in memory: real files, no disk
		}
	}
	root, err := os.MkdirTemp(base, fmt.Sprintf("seqd-sim-%d-", w.cfg.Seed))
	if err != nil {
		return nil, err
	}
	c := &simCluster{w: w, root: root, primary: 0, elect: seededElection{w}}
	for i := range c.m {
		m := &member{id: uint64(i + 1), dir: filepath.Join(root, fmt.Sprintf("m%d", i+1))}
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
		v[i] = fsm.Member{ID: uint64(i + 1), Role: fsm.Voter}
	}
	return v
}

// close removes the stores (the end of a run).
func (c *simCluster) close() {
	for _, m := range c.m {
		if m != nil && m.sb != nil {
			_ = m.sb.Close()
			m.sb = nil
		}
	}
	if os.Getenv("SEQD_SIM_KEEP") != "" {
		fmt.Println("kept", c.root)
		return
	}
	_ = os.RemoveAll(c.root)
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
	cfg.Store.Sync = replayer.SyncNone
	cfg.Store.SegmentBytes = 1 << 20 // segments roll often
	cfg.Store.WriteBufferBytes = 128 << 10
	cfg.Store.ReadBufferBytes = 128 << 10
	cfg.AckKeepalive = 10 * time.Millisecond
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
	if m.sb != nil {
		_ = m.sb.Close()
		m.sb = nil
	}
	if m.client != nil {
		_ = m.client.Close()
		m.client = nil
	}
	m.dead, m.upAt, m.cutOff = true, c.w.now+downFor, false
	c.kills++
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
	c.acks.Observe(frame, from)
	return true
}

// persist appends a packet the primary published first to its own store
// (Config.PrimaryStore), so that what it counts as held in the quorum
// survives its crash.
func (c *simCluster) persist(pkt []byte, info sequencer.PacketInfo) {
	if c.w.cfg.PrimaryStore && c.primary >= 0 && c.own != nil {
		c.own.Put(pkt, info)
	}
}

// stable is the primary's stable from the quorum.
func (c *simCluster) stable() uint64 { return c.acks.Stable(c.w.seq.Published()) }

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
				if err := c.startStandby(m); err != nil {
					w.fail("%v", err)
				}
			}
			continue
		}
		if m.cutOff && w.now >= m.healAt {
			w.net.Partition(m.peer, false)
			m.cutOff = false
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

// faults injects the group's faults, and runs the election when due.
func (c *simCluster) faults() {
	w := c.w
	if c.primary < 0 || c.isolated {
		if w.now >= c.electAt {
			c.election()
		}
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
		}
	}
	if !w.cfg.EpochChanges || c.changes >= 4 || w.rng.IntN(10000) != 0 {
		return
	}
	// The primary fails: killed, or cut off from its standbys (their
	// acks lost, the stream lost to them) until a new leader deposes it.
	// Raft notices after an election timeout.
	c.electAt = w.now + int64(time.Millisecond)*int64(1+w.rng.IntN(5))
	if w.rng.IntN(3) == 0 {
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
	}
	c.kill(c.m[c.primary], int64(time.Millisecond)*int64(1+w.rng.IntN(20)))
	c.primary, c.own = -1, nil
}

// election deposes the primary (if it still runs) and starts the next
// epoch on a leader that sealed a quorum; with fewer than a quorum of
// live members it waits for restarts.
func (c *simCluster) election() {
	w := c.w
	var cands []int
	for i, m := range c.m {
		if i != c.primary && !m.dead && m.sb != nil {
			cands = append(cands, i)
		}
	}
	// The members a seal reaches: the live standbys. A deposed primary
	// that still runs is not one yet (it reopens as a standby after).
	if len(cands) < members/2+1 {
		c.electAt = w.now + int64(time.Millisecond)
		return
	}
	// Seal epoch e on every reachable member: the cut is the highest
	// contiguous seq a quorum reports (quorums intersect: it holds every
	// stable seq).
	var cut uint64
	var fresh []int // members whose newest record is of the current epoch's stream
	for _, i := range cands {
		got, err := c.m[i].sb.Seal(w.epoch)
		if err != nil {
			w.fail("seal of member %d at epoch %d: %v", c.m[i].id, w.epoch, err)
			return
		}
		// A member that missed the epoch changes after its newest
		// record's epoch holds cut records past that epoch's cut: the
		// leader counts it only to the cut (it knows every epoch's cut),
		// and neither elects it nor fetches from it.
		stale := false
		if e := c.m[i].sb.HeldEpoch(); e < w.epoch {
			if last, ok := w.cutOf(e); ok && got > last {
				got, stale = last, true
			}
		}
		if !stale {
			fresh = append(fresh, i)
		}
		cut = max(cut, got)
		if debug {
			fmt.Printf("t=%v seal m%d epoch %d: %d stale=%v (stable %d)\n", time.Duration(w.now), c.m[i].id, w.epoch, got, stale, w.seq.Stable())
		}
	}
	leader, ok := c.elect.elect(fresh)
	if debug && ok {
		fmt.Printf("t=%v elect m%d cut=%d epoch %d\n", time.Duration(w.now), c.m[leader].id, cut, w.epoch+1)
	}
	if !ok {
		w.fail("no sealed member can lead: every one holds records past an old cut (%v)", cands)
		return
	}
	var srcs []standby.Source
	for _, i := range fresh {
		if i != leader {
			srcs = append(srcs, c.m[i].sb)
		}
	}
	if stable := w.seq.Stable(); cut < stable {
		w.fail("the sealed quorum holds up to %d, below stable %d", cut, stable)
		return
	}
	cut = max(cut, w.epochStart-1)
	old := c.primary
	lm := c.m[leader]
	if err := lm.sb.CatchUpFrom(cut, srcs...); err != nil {
		w.fail("leader %d catch-up to %d: %v", lm.id, cut, err)
		return
	}
	t, err := lm.sb.Takeover(cut)
	if err != nil {
		w.fail("leader %d takeover at %d: %v", lm.id, cut, err)
		return
	}
	// The failover state's cuts of the earlier epochs (the Node reads
	// them from Raft).
	for _, c := range w.cuts {
		t.Cuts = append(t.Cuts, sequencer.EpochCut{Epoch: c.epoch, Last: c.last})
	}
	if cut > 0 {
		// The standby's State at the cut must be the stream's.
		want, err := w.stateAt(cut)
		if err != nil {
			w.fail("epoch change at %d: %v", cut, err)
			return
		}
		if string(want.Snapshot()) != string(t.State.Snapshot()) {
			w.fail("leader %d: its State at cut %d differs from the stream's", lm.id, cut)
			return
		}
	}
	cfg := w.sc
	cfg.Epoch = w.epoch + 1
	cfg.FirstSeq = cut + 1
	cfg.StartTime = w.lastStamp() // the last stamp any node saw (fsm checkpoints, in the Node)
	var seq sequencer.SinkShell
	if cut == 0 {
		seq, err = sequencer.NewSinkShell(cfg, w)
	} else {
		seq, err = sequencer.NewPrimarySinkShell(cfg, w, t)
	}
	if err != nil {
		w.fail("epoch change at %d: %v", cut, err)
		return
	}
	_ = lm.client.Close()
	lm.client, lm.onFrame = nil, nil
	// The leader's store is the primary's history: kept open until the
	// primacy ends (kill closes it).
	w.startEpoch(seq, cfg.Epoch, cut)
	c.primary, c.isolated, c.own = leader, false, t.History
	c.changes++
	c.acks = cluster.NewQuorumAcks(cluster.Epoch{Session: 1, Epoch: w.epoch, FirstSeq: cut + 1, Members: c.voters(), Self: lm.id})
	for _, m := range c.m {
		if m.cutOff && m.healAt <= w.now {
			w.net.Partition(m.peer, false)
			m.cutOff = false
		}
	}
	if old >= 0 {
		// The deposed primary stops at once and comes back as a
		// standby on its store (a new follower, as the Node does).
		om := c.m[old]
		if om.sb != nil {
			_ = om.sb.Close()
			om.sb = nil
		}
		c.restarts++
		if err := c.startStandby(om); err != nil {
			w.fail("%v", err)
		}
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
	if c.primary < 0 || c.isolated {
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
