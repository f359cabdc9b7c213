package node

import (
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// lossyLink plays a sequencer behind a link that loses command frames:
// it accepts this node's commands only in cmdSeq order, as the real one
// does, and echoes them into the stream after delay.
type lossyLink struct {
	t        testing.TB
	s        *stream
	seq      uint64
	last     uint64
	rng      uint64
	lossPct  uint64
	delay    int64
	pending  []pendingEcho
	accepted uint64
	beat     int64 // last heartbeat
}

type pendingEcho struct {
	at  int64
	rec rec
}

func (l *lossyLink) random() uint64 {
	l.rng += 0x9e3779b97f4a7c15
	z := l.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// take is the link's end of the core's Output.
func (l *lossyLink) take(now int64, f []byte) {
	if k, _ := wire.PeekKind(f); k != wire.KindCommand || l.random()%100 < l.lossPct {
		return
	}
	var p wire.CommandPacket
	if err := wire.DecodeCommand(f, &p); err != nil {
		l.t.Fatal(err)
	}
	if l.seq == 1 && l.last == 0 && len(l.pending) == 0 {
		l.pending = append(l.pending, pendingEcho{now + l.delay, l.s.internal(wire.Internal{Type: wire.InternalIncarnation, Account: p.Account, Value: p.Incarnation})})
	}
	var c wire.Command
	for p.Next(&c) {
		if c.CmdSeq != l.last+1 {
			continue
		}
		l.last++
		l.accepted++
		l.pending = append(l.pending, pendingEcho{now + l.delay, rec{payload: append([]byte(nil), c.Payload...), account: p.Account, cmdSeq: c.CmdSeq}})
	}
}

func (l *lossyLink) deliver(c *Core, now int64) {
	n := 0
	for n < len(l.pending) && l.pending[n].at <= now {
		n++
	}
	if n == 0 {
		// Idle: a heartbeat every millisecond, as a sequencer sends.
		if now-l.beat >= int64(time.Millisecond) {
			l.beat = now
			step(l.t, c, now, l.s.heartbeat(l.seq, l.seq-1, now))
		}
		return
	}
	recs := make([]rec, n)
	for i := range recs {
		recs[i] = l.pending[i].rec
	}
	l.pending = l.pending[n:]
	step(l.t, c, now, l.s.packet(l.seq, l.seq+uint64(n)-1, 0, recs...))
	l.seq += uint64(n)
}

type linkOut struct {
	l   *lossyLink
	now *int64
}

func (o linkOut) Send(f []byte) { o.l.take(*o.now, f) }

// TestCore_LossyLinkRecoversPromptly: with 5% of command frames lost and
// a sequencer that drops every command after a hole, a node still gets
// its commands through at a steady pace; the resend timers do not back
// off into long stalls. 20000 commands took 3.3s of virtual time with
// whole-window resends every ResendInterval (20ms), 0.3s with timers
// from the measured round trip (200us here; heartbeats every 1ms).
func TestCore_LossyLinkRecoversPromptly(t *testing.T) {
	cfg := testConfig()
	cfg.Window = 256
	cfg.ResendInterval = 20 * time.Millisecond
	cfg.MinResendInterval = time.Millisecond
	cfg.MaxPacketBytes = 1024
	l := &lossyLink{t: t, s: newStream(t), seq: 1, rng: 7, lossPct: 5, delay: int64(200 * time.Microsecond)}
	var now int64
	c, err := NewCore(cfg, &recorder{}, linkOut{l, &now})
	if err != nil {
		t.Fatal(err)
	}
	const total = 20000
	sent := 0
	step := int64(100 * time.Microsecond)
	for ; now < int64(100*time.Second) && c.Stats().Acked < total; now += step {
		l.deliver(c, now)
		for sent < total {
			if _, err := c.Send(now, make([]byte, 50+sent%150)); err != nil {
				break
			}
			sent++
		}
		c.Tick(now)
	}
	st := c.Stats()
	srtt, rto := c.RTT()
	t.Logf("%d commands in %v of virtual time: %d resends, srtt %v rto %v", st.Acked, time.Duration(now), st.Resends, time.Duration(srtt), time.Duration(rto))
	if st.Acked < total || now > int64(2*time.Second) {
		t.Fatalf("%d of %d commands acked after %v", st.Acked, total, time.Duration(now))
	}
}
