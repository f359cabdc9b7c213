package replayer

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

const killChildEnv = "REPLAYER_TEST_KILL_CHILD_DIR"

// msgSize is the size of message seq in the kill test's stream: 256
// bytes, and now and then one that is fragmented.
func msgSize(seq uint64) int {
	if seq%500 == 0 {
		return 4000
	}
	return 256
}

// killStream yields the kill test's packets in order, built as the
// sequencer batches them.
type killStream struct {
	st  *stream
	i   int
	seq uint64
}

func (k *killStream) next() []byte {
	for k.i >= len(k.st.pkts) {
		k.st.pkts, k.i = k.st.pkts[:0], 0
		for j := 0; j < 64; j++ {
			k.seq++
			if k.seq%100000 == 0 {
				k.st.newEpoch()
			}
			k.st.msg(msgSize(k.seq))
		}
		// Keep the packet open: the last message may share it with the
		// next batch, as in the sequencer; only finished packets are out.
		if len(k.st.pkts) == 0 {
			continue
		}
	}
	p := k.st.pkts[k.i]
	k.i++
	return p
}

func killConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 4 << 20
	cfg.MaxPacketBytes = 1472
	return cfg
}

// TestStore_KillChild is the child of TestStore_SIGKILLMidWrite: it
// appends at full rate until killed, and after each Tick (which hands
// everything appended to the OS) prints the contiguous seq.
func TestStore_KillChild(t *testing.T) {
	dir := os.Getenv(killChildEnv)
	if dir == "" {
		t.Skip("child of TestStore_SIGKILLMidWrite")
	}
	s, _, err := Open(dir, killConfig())
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	k := &killStream{st: newStream()}
	start := time.Now()
	for i := 1; ; i++ {
		if err := s.Append(k.next()); err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		if i%64 == 0 {
			if err := s.Tick(int64(time.Since(start))); err != nil {
				fmt.Println("error", err)
				os.Exit(2)
			}
			if i%4096 == 0 {
				fmt.Println("flushed", s.Contiguous())
			}
		}
	}
}

// TestStore_SIGKILLMidWrite runs a child process that appends at full
// rate, kills it with SIGKILL, and checks that Open recovers a gap-free
// prefix holding at least everything the child had handed to the OS, with
// the right bytes, and that the store goes on from there.
func TestStore_SIGKILLMidWrite(t *testing.T) {
	if os.Getenv(killChildEnv) != "" {
		t.Skip("in the child")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStore_KillChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), killChildEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	const target = 400000 // seqs handed to the OS before the kill
	var flushed uint64
	deadline := time.After(2 * time.Minute)
wait:
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("child exited before the kill: %v\n%s", cmd.Wait(), stderr.String())
			}
			f := strings.Fields(l)
			if len(f) == 2 && f[0] == "flushed" {
				flushed, _ = strconv.ParseUint(f[1], 10, 64)
				if flushed >= target {
					break wait
				}
			} else if f[0] == "error" {
				t.Fatalf("child: %s", l)
			}
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("child reached seq %d of %d in 2 minutes", flushed, target)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range lines {
		}
	}()
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child wait: %v", err)
	}
	t0 := time.Now()
	s, rec, err := Open(dir, killConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	t.Logf("recovered in %v: %s", time.Since(t0), rec)
	if rec.Corrupt != nil {
		t.Fatalf("corruption after SIGKILL: %v", rec.Corrupt)
	}
	if rec.Oldest != 1 || rec.Contiguous < flushed {
		t.Fatalf("recovered seqs %d..%d, the child had handed %d to the OS", rec.Oldest, rec.Contiguous, flushed)
	}
	// Every record from 1 on, in order, with its bytes.
	var p wire.Packet
	var r wire.Record
	want := uint64(1)
	var wantOff uint32
	n := 0
	s.Range(1, rec.Contiguous+1, func(pkt []byte, _ sequencer.PacketInfo) bool {
		n++
		if err := wire.DecodePacket(pkt, &p); err != nil {
			t.Fatalf("packet %d: %v", n, err)
		}
		for p.Next(&r) {
			if r.Seq != want || r.Offset != wantOff {
				t.Fatalf("record seq %d offset %d, want seq %d offset %d", r.Seq, r.Offset, want, wantOff)
			}
			if int(r.Total) != msgSize(r.Seq) || !bytes.Equal(r.Payload, payload(r.Seq, int(r.Total))[r.Offset:int(r.Offset)+len(r.Payload)]) {
				t.Fatalf("seq %d: wrong bytes", r.Seq)
			}
			if end := r.Offset + uint32(len(r.Payload)); end == r.Total {
				want, wantOff = want+1, 0
			} else {
				wantOff = end
			}
		}
		return true
	})
	if want <= rec.Contiguous {
		t.Fatalf("served up to seq %d, want %d", want-1, rec.Contiguous)
	}
	if e, ok := s.EpochOf(rec.Contiguous); !ok || e != uint32(1+rec.Contiguous/100000) {
		t.Fatalf("EpochOf(%d) = %d %v", rec.Contiguous, e, ok)
	}
	// The store goes on: replay the stream to where it stopped and append.
	k := &killStream{st: newStream()}
	newest, _ := s.Newest()
	for {
		pkt := k.next()
		if info := packetInfo(pkt); info == newest {
			break
		}
	}
	for i := 0; i < 1000; i++ {
		if err := s.Append(k.next()); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	}
}
