package receiver

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// TestReceiver_OneHeartbeatOfAFarEpochCapturesNothing: one forged
// heartbeat of epoch 2^32-1 (no Raft could have produced it while the
// current epoch publishes) is counted and dropped; the stream of the
// current epoch goes on, stable included. Before, every receiver followed
// it: the real primary's packets became an older epoch's, stable froze and
// nothing was delivered again.
func TestReceiver_OneHeartbeatOfAFarEpochCapturesNothing(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Rewind = false
	d := &drive{t: t, r: newTest(t, cfg)}
	ms := int64(time.Millisecond)
	d.step(0, Sequencer, s.msgs(1, 3))
	forged := newStream(t)
	forged.epoch, forged.epochStart = math.MaxUint32, 4
	err := d.step(ms, Sequencer, forged.heartbeat(4, 3, ms))
	if !errors.Is(err, ErrEpochJump) {
		t.Fatalf("Step(forged) = %v, want ErrEpochJump", err)
	}
	for q := uint64(4); q <= 10; q++ {
		d.step(int64(q)*ms, Sequencer, s.msgs(q, 1))
	}
	if d.r.Epoch() != 1 || d.r.Stable() != 10 || len(d.delivered) != 10 || d.r.Err() != nil {
		t.Fatalf("epoch %d, stable %d, delivered %v, err %v", d.r.Epoch(), d.r.Stable(), d.seqs(), d.r.Err())
	}
	if st := d.r.Stats(); st.EpochJumpHeld != 1 {
		t.Fatalf("stats %+v, want EpochJumpHeld 1", st)
	}
}

// TestReceiver_FarEpochFollowedOnceTheCurrentIsGone: a jump beyond
// MaxEpochJump is real when the current epoch has been silent for
// SessionTimeout while the new one publishes (a receiver that slept
// through many failovers): it is then followed. A jump within the bound is
// followed at once, as a failover is.
func TestReceiver_FarEpochFollowedOnceTheCurrentIsGone(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Rewind = false
	d := &drive{t: t, r: newTest(t, cfg)}
	ms := int64(time.Millisecond)
	d.step(0, Sequencer, s.msgs(1, 3))
	near := newStream(t)
	near.epoch, near.epochStart = 1+cfg.MaxEpochJump, 4
	d.step(ms, Sequencer, near.msgs(4, 1))
	if d.r.Epoch() != near.epoch || len(d.delivered) != 4 {
		t.Fatalf("jump of %d: epoch %d, delivered %v", cfg.MaxEpochJump, d.r.Epoch(), d.seqs())
	}
	far := newStream(t)
	far.epoch, far.epochStart = near.epoch+cfg.MaxEpochJump+1, 5
	last := 2 * int64(cfg.SessionTimeout)
	for now := 2 * ms; now <= last && d.r.Epoch() != far.epoch; now += 10 * ms {
		d.step(now, Sequencer, far.heartbeat(5, 4, now))
		if d.r.Epoch() == far.epoch && now < ms+int64(cfg.SessionTimeout) {
			t.Fatalf("far epoch followed at %dms, while the current one was heard at 1ms", now/ms)
		}
	}
	d.step(last+ms, Sequencer, far.msgs(5, 1))
	if d.r.Epoch() != far.epoch || len(d.delivered) != 5 || d.r.Err() != nil {
		t.Fatalf("epoch %d, delivered %v, err %v", d.r.Epoch(), d.seqs(), d.r.Err())
	}
}

// TestReceiver_ForgedNearEpochDoesNotFreezeTheStreamForGood: a forged
// heartbeat of the next epoch (within MaxEpochJump, so followed at once,
// as a failover must be) keeps the receiver off the real stream only
// until that epoch has been silent for SessionTimeout while the real one
// published: the receiver goes back and delivers the real stream, stable
// included. Before, stable froze for good and nothing was delivered again.
func TestReceiver_ForgedNearEpochDoesNotFreezeTheStreamForGood(t *testing.T) {
	s := newStream(t)
	cfg := testConfig()
	cfg.Rewind = false
	d := &drive{t: t, r: newTest(t, cfg)}
	ms := int64(time.Millisecond)
	d.step(0, Sequencer, s.msgs(1, 3))
	forged := newStream(t)
	forged.epoch, forged.epochStart = 2, 4
	d.step(ms, Sequencer, forged.heartbeat(4, 3, ms))
	if d.r.Epoch() != 2 {
		t.Fatalf("epoch %d: a next-epoch header is followed at once (the test proves nothing)", d.r.Epoch())
	}
	q := uint64(4)
	now := int64(0)
	for now = 10 * ms; now <= 2000*ms; now += 10 * ms {
		d.step(now, Sequencer, s.msgs(q, 1))
		q++
	}
	// What was fenced while the forged epoch was followed is asked for
	// again, and repaired.
	d.tick(now + int64(cfg.NakMaxDelay))
	if len(d.naks()) == 0 || d.naks()[0].nak.FromSeq != 4 {
		t.Fatalf("NAKs %+v, want one from seq 4", d.naks())
	}
	s.flags = wire.PacketRetransmit
	for r := uint64(4); r < q; r++ {
		d.step(now+int64(cfg.NakMaxDelay), Sequencer, s.msgs(r, 1))
	}
	if d.r.Epoch() != 1 || d.r.Stable() != q-1 || len(d.delivered) != int(q-1) || d.r.Err() != nil {
		t.Fatalf("epoch %d, stable %d, delivered %d of %d, err %v", d.r.Epoch(), d.r.Stable(), len(d.delivered), q-1, d.r.Err())
	}
}
