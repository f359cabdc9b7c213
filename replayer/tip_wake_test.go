package replayer

import (
	"bytes"
	"testing"
)

// OnAppend sees every packet the store takes, in order, as Append takes
// it: before the Tick that puts it in the file (a bridge's sending end
// forwards the stream from there, without waiting for the tip).
func TestStore_OnAppendSeesEachPacketBeforeTheTip(t *testing.T) {
	st := mixed(200)
	s, _ := mustOpen(t, t.TempDir(), testConfig())
	defer s.Close()
	var seen [][]byte
	s.OnAppend(func(pkt []byte) { seen = append(seen, append([]byte(nil), pkt...)) })
	for i, p := range st.pkts {
		if err := s.Append(p); err != nil {
			t.Fatalf("Append packet %d: %v", i, err)
		}
		if len(seen) != i+1 || !bytes.Equal(seen[i], p) {
			t.Fatalf("after Append %d: OnAppend saw %d packets (the last equal: %v)", i, len(seen), len(seen) == i+1 && bytes.Equal(seen[i], p))
		}
	}
	// A packet refused is not seen.
	if err := s.Append(st.pkts[0]); err == nil {
		t.Fatal("Append of a packet held took it")
	}
	if len(seen) != len(st.pkts) {
		t.Fatalf("OnAppend saw %d packets, want %d", len(seen), len(st.pkts))
	}
}

// A follower's Wake channel gets a signal when the tip moves and when the
// store closes, and none after it stopped waiting.
func TestTip_WakeSignalsMovesAndClose(t *testing.T) {
	st := mixed(400)
	s, _ := mustOpen(t, t.TempDir(), testConfig())
	tip := s.Tip()
	w, stop := tip.Wake()
	w2, stop2 := tip.Wake()
	select {
	case <-w:
		t.Fatal("a signal before the tip moved")
	default:
	}
	appendAll(t, s, st.pkts[:len(st.pkts)/2])
	if err := s.Tick(1); err != nil {
		t.Fatal(err)
	}
	for i, c := range []<-chan struct{}{w, w2} {
		select {
		case <-c:
		default:
			t.Fatalf("follower %d: no signal after the tip moved to %d", i, tip.Seq())
		}
	}
	stop2()
	appendAll(t, s, st.pkts[len(st.pkts)/2:])
	if err := s.Tick(2); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w2:
		t.Fatal("a signal to a follower that stopped waiting")
	default:
	}
	<-w
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w:
	default:
		t.Fatal("no signal when the store closed")
	}
	stop()
	if n := tip.nwait.Load(); n != 0 {
		t.Fatalf("%d waiters left", n)
	}
}
