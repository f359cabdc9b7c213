package node

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"time"

	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// ReplayRemote runs the stream a remote replayer holds (its rewind
// server at addr, docs/protocol.md "Rewind") through h, seqs from..to,
// as Archive.Replay runs a local archive: from 0 is the oldest seq the
// replayer holds, to 0 its newest when asked (the rewind ends at its
// tip, without following). The same Core and receiver deliver every
// message once, in order, whole; at the tip the newest epoch served is
// final (unless ReplayStableOnly), as at the end of an archive.
//
// It fails with ErrArchiveRange when the replayer no longer holds from
// (naming the seqs it holds) or ends before to, with ErrRewind (wrapped,
// naming the replayer) when it cannot be reached or the connection
// breaks, and names the seq of a corrupt record the replayer reports,
// after delivering everything before it. It allocates nothing per
// message.
func ReplayRemote(addr string, from, to uint64, h Handler, opts ...ReplayOption) (ReplayStats, error) {
	var o replayOptions
	for _, fn := range opts {
		fn(&o)
	}
	if to == 0 {
		to = math.MaxUint64
	}
	if from > to {
		return ReplayStats{}, fmt.Errorf("%w: from %d is past to %d", ErrArchiveRange, from, to)
	}
	c, err := tlsconf.Dial(addr, o.tls, rewindDialWait)
	if err != nil {
		return ReplayStats{}, fmt.Errorf("%w: replayer %s: %w", ErrRewind, addr, err)
	}
	defer c.Close()
	var rep wire.RewindReply
	if err := askRewind(c, max(from, 1), &rep); err != nil {
		return ReplayStats{}, fmt.Errorf("%w: replayer %s: %w", ErrRewind, addr, err)
	}
	if rep.Status == wire.RewindGone && from == 0 && rep.Oldest > 1 {
		// From the replayer's oldest seq: ask again from there.
		c.Close()
		if c, err = tlsconf.Dial(addr, o.tls, rewindDialWait); err != nil {
			return ReplayStats{}, fmt.Errorf("%w: replayer %s: %w", ErrRewind, addr, err)
		}
		defer c.Close()
		if err := askRewind(c, rep.Oldest, &rep); err != nil {
			return ReplayStats{}, fmt.Errorf("%w: replayer %s: %w", ErrRewind, addr, err)
		}
	}
	switch rep.Status {
	case wire.RewindOK:
	case wire.RewindGone:
		return ReplayStats{}, fmt.Errorf("%w: asked for %d..%s, replayer %s holds seqs %d..%d", ErrArchiveRange, max(from, 1), upTo(to), addr, rep.Oldest, rep.Newest)
	default:
		return ReplayStats{}, fmt.Errorf("%w: replayer %s refused (status %d)", ErrRewind, addr, rep.Status)
	}
	from = max(from, rep.Oldest, 1)
	if rep.Newest < from {
		return ReplayStats{}, fmt.Errorf("%w: asked for %d..%s, replayer %s holds seqs %d..%d", ErrArchiveRange, from, upTo(to), addr, rep.Oldest, rep.Newest)
	}

	cfg := DefaultConfig()
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	cfg.Account, cfg.Instance = o.account, o.instance
	cfg.ReadOnly, cfg.Mode, cfg.Session = true, Safe, rep.Session
	cfg.Rewind, cfg.RewindFrom = true, from
	cfg.StatusInterval = 0
	cfg.SilenceTimeout = 0 // a replay has no live stream to fall silent
	r := &replay{h: h, to: to, o: &o}
	r.act, _ = h.(ActivationHandler)
	r.tim, _ = h.(TimerHandler)
	r.rej, _ = h.(RejectionHandler)
	core, err := NewCore(cfg, r, replayOutput{})
	if err != nil {
		return ReplayStats{}, err
	}
	r.core = core
	r.next = o.every

	br := bufio.NewReaderSize(deadlineConn{c}, 1<<20)
	buf := make([]byte, wire.RewindFrameHeaderBytes+wire.RewindMaxPacketBytes)
	var pkt wire.Packet
	var epoch uint32
	var epochStart, last uint64
	var end error
	for {
		if _, err := io.ReadFull(br, buf[:wire.RewindFrameHeaderBytes]); err != nil {
			end = fmt.Errorf("%w: replayer %s: the stream broke after seq %d: %w", ErrRewind, addr, core.Delivered(), err)
			break
		}
		n, err := wire.RewindFrameLen(buf[:wire.RewindFrameHeaderBytes], wire.RewindMaxPacketBytes)
		if err == nil {
			_, err = io.ReadFull(br, buf[wire.RewindFrameHeaderBytes:n])
		}
		var p []byte
		var reason uint8
		var next uint64
		if err == nil {
			p, reason, next, err = wire.DecodeRewindFrame(buf[:n])
		}
		if err == nil && p != nil {
			err = wire.DecodePacket(p, &pkt)
		}
		if err != nil {
			end = fmt.Errorf("%w: replayer %s: the stream broke after seq %d: %w", ErrRewind, addr, core.Delivered(), err)
			break
		}
		if p == nil {
			switch reason {
			case wire.RewindEndTip:
			case wire.RewindEndCorrupt:
				end = fmt.Errorf("node: replay %d..%s: replayer %s holds a corrupt record at seq %d: nothing from it on is served", from, upTo(to), addr, next)
			default:
				end = fmt.Errorf("%w: replayer %s ended the stream before seq %d (reason %d)", ErrRewind, addr, next, reason)
			}
			break
		}
		epoch, epochStart, last = pkt.Epoch, pkt.EpochStart, max(last, pkt.FirstSeq+uint64(pkt.Count)-1)
		if !r.onPacket(p, sequencer.PacketInfo{}) {
			break
		}
	}
	if r.err == nil && end == nil && !r.stopped && core.Delivered() < min(to, last) && !o.stableOnly && last > 0 {
		// The replayer's tip: the newest epoch it served is final.
		hb, err := wire.AppendHeartbeat(r.hb[:], epoch, rep.Session, last+1, last, 0, epochStart)
		if err == nil {
			err = core.Step(0, hb)
		}
		if err != nil && core.Err() != nil {
			r.err = core.Err()
		}
	}
	if r.err == nil {
		r.err = core.Err()
	}
	if o.progress != nil {
		o.progress(r.stats.Last)
	}
	switch {
	case r.err != nil:
		return r.stats, r.err
	case r.stopped || core.Delivered() >= to:
		return r.stats, nil
	case end != nil:
		return r.stats, end
	}
	want := min(to, last)
	if o.stableOnly {
		want = min(want, core.Stable())
	}
	if core.Delivered() < want {
		return r.stats, fmt.Errorf("%w: replay %d..%s from replayer %s stopped after seq %d of %d", ErrArchiveRange, from, upTo(to), addr, core.Delivered(), want)
	}
	if to != math.MaxUint64 && to > last {
		return r.stats, fmt.Errorf("%w: asked for %d..%d, replayer %s holds seqs %d..%d", ErrArchiveRange, from, to, addr, rep.Oldest, last)
	}
	return r.stats, nil
}

// deadlineConn gives each read of a replay rewindReplyWait: a replayer
// that stops sending ends the replay with an error, never a hang.
type deadlineConn struct{ net.Conn }

func (d deadlineConn) Read(b []byte) (int, error) {
	d.Conn.SetReadDeadline(time.Now().Add(rewindReplyWait))
	return d.Conn.Read(b)
}

// askRewind sends a rewind request from seq from without follow and
// reads the reply.
func askRewind(c net.Conn, from uint64, rep *wire.RewindReply) error {
	req := wire.RewindRequest{FromSeq: from}
	c.SetDeadline(time.Now().Add(rewindReplyWait))
	if _, err := c.Write(wire.AppendRewindRequest(nil, &req)); err != nil {
		return err
	}
	var hb [wire.RewindReplyBytes]byte
	if _, err := io.ReadFull(c, hb[:]); err != nil {
		if errors.Is(err, io.EOF) {
			return errors.New("it closed the connection without an answer")
		}
		return fmt.Errorf("no answer: %w", err)
	}
	c.SetDeadline(time.Time{})
	return wire.DecodeRewindReply(hb[:], rep)
}
