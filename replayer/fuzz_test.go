package replayer

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// FuzzDecodeFrame: bytes read from a segment are untrusted. The decoder
// never panics, and what it accepts is a frame putFrame would write, whose
// packet decodes.
func FuzzDecodeFrame(f *testing.F) {
	st := mixed(200)
	for _, p := range st.pkts[:20] {
		b := make([]byte, FrameHeaderBytes+len(p))
		putFrame(b, p, packetInfo(p).FirstSeq)
		f.Add(b)
		f.Add(b[:len(b)-1])
		c := bytes.Clone(b)
		c[len(c)/2] ^= 1
		f.Add(c)
	}
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p wire.Packet
		n, pkt, err := decodeFrame(b, MaxFramePacketBytes, &p)
		if err != nil {
			return
		}
		if n > len(b) || n != FrameHeaderBytes+len(pkt) {
			t.Fatalf("frame of %d bytes in %d, packet %d", n, len(b), len(pkt))
		}
		again := make([]byte, n)
		putFrame(again, pkt, p.FirstSeq)
		if !bytes.Equal(again, b[:n]) {
			t.Fatal("accepted frame differs from its re-encoding")
		}
		info := packetInfo(pkt)
		if info.FirstSeq != p.FirstSeq || info.Count != p.Count {
			t.Fatalf("packetInfo %+v, packet %d+%d", info, p.FirstSeq, p.Count)
		}
	})
}

// FuzzOpenSegment: Open of a directory holding one segment file of
// arbitrary bytes never panics, never fails on the contents (only on the
// file system), and serves only frames that check.
func FuzzOpenSegment(f *testing.F) {
	st := mixed(300)
	dir := f.TempDir()
	s, _, err := Open(dir, testConfig())
	if err != nil {
		f.Fatal(err)
	}
	for _, p := range st.pkts {
		if err := s.Append(p); err != nil {
			f.Fatal(err)
		}
	}
	s.Close()
	seg, err := os.ReadFile(filepath.Join(dir, segmentName(1)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seg)
	f.Add(seg[:len(seg)-100])
	f.Add(seg[:SegmentHeaderBytes+3])
	c := bytes.Clone(seg)
	c[len(c)/2] ^= 4
	f.Add(c)
	f.Fuzz(func(t *testing.T, b []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg := testConfig()
		cfg.ReadOnly = true
		s, rec, err := Open(dir, cfg)
		if err != nil {
			t.Fatalf("Open failed on the contents: %v", err)
		}
		defer s.Close()
		if rec.Packets == 0 {
			return
		}
		var p wire.Packet
		prev := uint64(0)
		s.Range(1, ^uint64(0), func(pkt []byte, info sequencer.PacketInfo) bool {
			if !bytes.Contains(b, pkt) {
				t.Fatal("served bytes that are not in the file")
			}
			if err := wire.DecodePacket(pkt, &p); err != nil {
				t.Fatalf("served a packet that does not decode: %v", err)
			}
			if info.FirstSeq < prev {
				t.Fatalf("served seq %d after %d", info.FirstSeq, prev)
			}
			prev = info.FirstSeq
			return true
		})
	})
}
