package sequencer

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/seqd/seqd/wire"
)

// fragmentFrames splits payload into command frames of at most frameBytes,
// one fragment each, as a node would.
func fragmentFrames(t testing.TB, cmdSeq uint64, payload []byte, frameBytes int) [][]byte {
	t.Helper()
	room := frameBytes - wire.CommandHeaderBytes - wire.CommandRecordBytes - wire.FragmentHeaderBytes
	var frames [][]byte
	for off := 0; off < len(payload); off += room {
		end := min(off+room, len(payload))
		frames = append(frames, frame(t, acctA, 1, 0, wire.Command{
			CmdSeq: cmdSeq, Flags: wire.CmdFragment, Total: uint32(len(payload)), Offset: uint32(off), Payload: payload[off:end],
		}))
	}
	return frames
}

func TestCore_FragmentReassembly16MiB(t *testing.T) {
	cfg := testConfig()
	c, sink := newCore(t, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 16<<20)
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	mustStep(t, c, 1, frame(t, acctA, 1, 0, cmd(1, "before")))

	frames := fragmentFrames(t, 2, big, 1472)
	// Odd order, with about a tenth of the fragments delivered twice.
	order := rng.Perm(len(frames))
	for i := 0; i < len(frames)/10; i++ {
		order = append(order, rng.IntN(len(frames)))
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	// The last delivery completes the message; hold one fragment back so
	// we can check that nothing is sequenced before it. A fragment far
	// beyond the bytes held is dropped (AheadFragments), as the node's
	// resends of the whole command bring it again: passes over the same
	// order until only the one held back is missing.
	held := order[0]
	for pass := 0; ; pass++ {
		before := c.Stats().AheadFragments
		for _, i := range order {
			if i != held {
				mustStep(t, c, 2, frames[i])
			}
		}
		if c.Stats().AheadFragments == before {
			break
		}
		if pass > 20 {
			t.Fatalf("still dropping fragments after %d resends: %+v", pass, c.Stats())
		}
	}
	c.Flush(at(2))
	if got := commands(decodeStream(t, sink.published, cfg.MaxPacketBytes)); len(got) != 1 {
		t.Fatalf("sequenced %d commands before the last fragment arrived", len(got))
	}
	// A resend of the missing fragment, with the next command behind it.
	last := frames[held]
	var p wire.CommandPacket
	var fc wire.Command
	if err := wire.DecodeCommand(last, &p); err != nil {
		t.Fatal(err)
	}
	p.Next(&fc)
	mustStep(t, c, 3, frame(t, acctA, 1, 0, fc, cmd(3, "after")))
	c.Flush(at(3))

	ms := decodeStream(t, sink.published, cfg.MaxPacketBytes)
	got := commands(ms)
	if len(got) != 3 || got[0] != "before" || got[2] != "after" {
		t.Fatalf("stream has %d commands", len(got))
	}
	if !bytes.Equal([]byte(got[1]), big) {
		t.Fatal("reassembled stream message differs from the 16 MiB command")
	}
	st := c.Stats()
	if st.Commands != 3 || st.Duplicates != 0 || st.BadFragments != 0 {
		t.Fatalf("stats %+v", st)
	}
	// Fragment packets stand alone; only the last shares its packet.
	frag, shared := 0, 0
	for _, b := range sink.published {
		var pk wire.Packet
		_ = wire.DecodePacket(b, &pk)
		var r wire.Record
		for i := 0; pk.Next(&r); i++ {
			if !r.Fragment() {
				continue
			}
			frag++
			if i != 0 {
				t.Fatalf("fragment at offset %d is record %d of its packet", r.Offset, i)
			}
			if pk.Count > 1 {
				if int(r.Offset)+len(r.Payload) != len(big) {
					t.Fatalf("non-final fragment at offset %d shares its packet", r.Offset)
				}
				shared++
			}
		}
	}
	if room := cfg.MaxPacketBytes - wire.PacketHeaderBytes - wire.RecordHeaderBytes - wire.FragmentHeaderBytes; frag != (len(big)+room-1)/room || shared != 1 {
		t.Fatalf("%d fragment packets (%d shared), want %d (1 shared)", frag, shared, (len(big)+room-1)/room)
	}
}

func TestCore_FragmentTotalMismatchDropped(t *testing.T) {
	c, sink := newCore(t, testConfig())
	f := func(total, off uint32, p string) []byte {
		return frame(t, acctA, 1, 0, wire.Command{CmdSeq: 1, Flags: wire.CmdFragment, Total: total, Offset: off, Payload: []byte(p)})
	}
	mustStep(t, c, 0, f(6, 0, "abc"))
	mustStep(t, c, 0, f(9, 3, "def")) // disagrees with the reassembly in progress
	mustStep(t, c, 0, f(6, 3, "def"))
	c.Flush(at(0))
	if got := commands(decodeStream(t, sink.published, 1472)); len(got) != 1 || got[0] != "abcdef" {
		t.Fatalf("stream %q", got)
	}
	if c.Stats().BadFragments != 1 {
		t.Fatalf("stats %+v", c.Stats())
	}
}

func TestAssembly_KeepsRangesAcrossResends(t *testing.T) {
	tests := []struct {
		name  string
		total uint32
		adds  [][2]uint32 // offset, length
		want  []span
		done  bool
	}{
		{"empty message", 0, nil, nil, true},
		{"in order", 10, [][2]uint32{{0, 5}, {5, 5}}, []span{{0, 10}}, true},
		{"reverse", 10, [][2]uint32{{5, 5}, {0, 5}}, []span{{0, 10}}, true},
		{"hole", 10, [][2]uint32{{0, 3}, {6, 4}}, []span{{0, 3}, {6, 10}}, false},
		{"hole filled by overlapping resend", 10, [][2]uint32{{0, 3}, {6, 4}, {2, 5}}, []span{{0, 10}}, true},
		{"bridging three", 20, [][2]uint32{{0, 2}, {4, 2}, {8, 2}, {12, 2}, {1, 10}}, []span{{0, 11}, {12, 14}}, false},
		{"duplicate", 10, [][2]uint32{{3, 3}, {3, 3}}, []span{{3, 6}}, false},
		{"insert in the middle", 30, [][2]uint32{{0, 2}, {20, 2}, {10, 2}}, []span{{0, 2}, {10, 12}, {20, 22}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a assembly
			a.start(1, tt.total)
			src := make([]byte, tt.total)
			for i := range src {
				src[i] = byte(i + 1)
			}
			done := tt.total == 0 && a.add(0, nil)
			for _, ad := range tt.adds {
				done = a.add(ad[0], src[ad[0]:ad[0]+ad[1]])
			}
			if done != tt.done || len(a.have) != len(tt.want) {
				t.Fatalf("done %v spans %v, want %v %v", done, a.have, tt.done, tt.want)
			}
			for i := range tt.want {
				if a.have[i] != tt.want[i] {
					t.Fatalf("spans %v, want %v", a.have, tt.want)
				}
				if !bytes.Equal(a.buf[tt.want[i].from:tt.want[i].to], src[tt.want[i].from:tt.want[i].to]) {
					t.Fatalf("bytes of span %v differ", tt.want[i])
				}
			}
		})
	}
}

// TestCore_ReassemblyMemoryIsBounded: a command whose reassembly would
// go beyond MaxReassemblyBytes, charged by the bytes that arrived, is
// rejected in the stream at the fragment that crosses it (its sender's
// next command gets through); large buffers are released once their
// command is sequenced.
func TestCore_ReassemblyMemoryIsBounded(t *testing.T) {
	cfg := testConfig()
	cfg.RingBytes = 1 << 13 * cfg.MaxPacketBytes
	cfg.MaxMessageBytes = 2 << 20
	cfg.MaxReassemblyBytes = 3 << 20
	c, sink := newCore(t, cfg)
	pa, pb := bytes.Repeat([]byte("A"), 2<<20), bytes.Repeat([]byte("B"), 2<<20)
	fa, fb := fragFrames(t, acctA, 1, pa), fragFrames(t, acctB, 1, pb)
	last := len(fa) - 1
	for _, f := range fa[:last] {
		mustStep(t, c, 1, f)
	}
	// Nearly 2 MiB held for A: B's bytes fit up to the 3 MiB budget only
	// (charged as they arrive), and the fragment that goes beyond it gets
	// B's command rejected.
	rejectedAt := -1
	for i, f := range fb {
		mustStep(t, c, 2, f)
		if rejectedAt < 0 && c.Stats().RejectedReassemblyFull == 1 {
			rejectedAt = i
		}
	}
	if st := c.Stats(); st.RejectedReassemblyFull != 1 || rejectedAt < 1 {
		t.Fatalf("RejectedReassemblyFull = %d at fragment %d, want 1 past the first", st.RejectedReassemblyFull, rejectedAt)
	}
	for _, f := range fa[last:] {
		mustStep(t, c, 3, f)
	}
	for _, f := range fragFrames(t, acctB, 2, pb) { // A's buffer was released: B now fits
		mustStep(t, c, 4, f)
	}
	c.Flush(at(5))
	var got [][]byte
	var rejected []string
	for _, m := range decodeStream(t, sink.published, cfg.MaxPacketBytes) {
		if m.Internal == nil {
			got = append(got, m.Payload)
		} else if m.Internal.Type == wire.InternalRejected {
			rejected = append(rejected, fmt.Sprintf("%v/%d cmd %d: %v", m.Internal.Account, m.Internal.Instance, m.Internal.ID, wire.RejectReason(m.Internal.Value)))
		}
	}
	if len(got) != 2 || !bytes.Equal(got[0], pa) || !bytes.Equal(got[1], pb) {
		t.Fatalf("sequenced %d commands, want A's then B's 2 MiB intact", len(got))
	}
	if want := []string{"bob/1 cmd 1: " + wire.RejectReassemblyFull.String()}; !slices.Equal(rejected, want) {
		t.Fatalf("rejections %q, want %q", rejected, want)
	}
	// The rest of a rejected command: duplicates.
	if st := c.Stats(); st.Commands != 2 || st.Rejected != 1 || st.Duplicates != uint64(len(fb)-1-rejectedAt) {
		t.Fatalf("stats %+v", st)
	}
}

// fragFrames splits payload into command frames of one fragment each, as
// command cmdSeq of account a, instance 1.
func fragFrames(t testing.TB, a wire.Account, cmdSeq uint64, payload []byte) [][]byte {
	t.Helper()
	var out [][]byte
	const room = 60000
	for off := 0; off < len(payload); off += room {
		end := min(off+room, len(payload))
		out = append(out, frame(t, a, 1, 0, wire.Command{CmdSeq: cmdSeq, Flags: wire.CmdFragment,
			Total: uint32(len(payload)), Offset: uint32(off), Payload: payload[off:end]}))
	}
	return out
}
