package sequencer

import (
	"bytes"
	"slices"
	"testing"

	"github.com/seqd/seqd/wire"
)

// TestCore_ReassemblyBudgetIsChargedByBytesThatArrived: four senders each
// send one 100-byte fragment declaring a 16 MiB command and go silent.
// They hold 400 bytes, and are charged that: a fifth sender's 16 MiB
// command still fits the 64 MiB budget and is sequenced. Before, each was
// charged its declared total, the four pinned the whole budget for
// ReassemblyTimeout (30 s) and the fifth was rejected (issue 14, item 9).
func TestCore_ReassemblyBudgetIsChargedByBytesThatArrived(t *testing.T) {
	cfg := testConfig()
	cfg.RingBytes = 1 << 15 * cfg.MaxPacketBytes
	cfg.MaxMessageBytes = 16 << 20
	cfg.MaxReassemblyBytes = 64 << 20
	c, sink := newCore(t, cfg)
	for _, name := range []string{"d1", "d2", "d3", "d4"} {
		mustStep(t, c, 1, frame(t, wire.MustAccount(name), 1, 0,
			wire.Command{CmdSeq: 1, Flags: wire.CmdFragment, Total: 16 << 20, Payload: make([]byte, 100)}))
	}
	if c.asm.reserved > 4*100 {
		t.Errorf("four 100-byte fragments charged %d bytes of the reassembly budget", c.asm.reserved)
	}
	erin := wire.MustAccount("erin")
	payload := bytes.Repeat([]byte("e"), 16<<20)
	for _, f := range fragFrames(t, erin, 1, payload) {
		mustStep(t, c, 2, f)
	}
	c.Flush(at(3))
	if got, want := events(t, sink, cfg), []string{"activated erin/1", "cmd erin/1#1"}; !slices.Equal(got, want) {
		t.Fatalf("stream %q, want %q (stats %+v)", got, want, c.Stats())
	}
}

// TestCore_FragmentFarAheadOfTheBytesHeldIsDropped: a 100-byte fragment
// at the end of a declared 16 MiB command would make the buffer 16 MiB;
// it is dropped and counted instead (the node resends fragments in
// order), so memory follows the bytes that arrived, not the offset a
// packet declares.
func TestCore_FragmentFarAheadOfTheBytesHeldIsDropped(t *testing.T) {
	cfg := testConfig()
	cfg.MaxMessageBytes = 16 << 20
	c, _ := newCore(t, cfg)
	mustStep(t, c, 1, frame(t, acctA, 1, 0,
		wire.Command{CmdSeq: 1, Flags: wire.CmdFragment, Total: 16 << 20, Offset: 16<<20 - 100, Payload: make([]byte, 100)}))
	if st := c.Stats(); st.AheadFragments != 1 || c.asm.reserved != 0 {
		t.Fatalf("charged %d bytes; stats %+v", c.asm.reserved, st)
	}
	if r := c.asm.get(senderKey{account: acctA, instance: 1}); r != nil && cap(r.asm.buf) > aheadSlackBytes {
		t.Fatalf("buffer of %d bytes for 100 that arrived", cap(r.asm.buf))
	}
}
