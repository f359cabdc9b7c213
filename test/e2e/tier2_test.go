package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// gossipAddr reads gossip=ADDR from a ready line.
func gossipAddr(t *testing.T, ready string) string {
	t.Helper()
	for _, f := range strings.Fields(ready) {
		if v, ok := strings.CutPrefix(f, "gossip="); ok {
			return v
		}
	}
	t.Fatalf("no gossip address in %q", ready)
	return ""
}

// tailProc is a running `seqd tail --format json` whose stdout is read
// only when drain starts (until then it blocks once the pipe is full,
// and so does its rewind: TCP backpressure holds it mid-rewind).
type tailProc struct {
	cmd    *exec.Cmd
	out    *bufio.Scanner
	stderr *syncBuffer
}

func startTail(t *testing.T, ctx context.Context, bin string, args []string) *tailProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append([]string{"tail", "--format", "json"}, args...)...)
	p := &tailProc{cmd: cmd}
	p.out, p.stderr = startPiped(t, cmd)
	p.out.Buffer(make([]byte, 64<<10), 1<<20)
	return p
}

// drain reads the tail's lines, checks each against want (the live
// stream's lines, seq by seq), SIGTERMs it once it printed the last one
// and returns an error for the first difference, a short stream or a bad
// exit.
func (p *tailProc) drain(want []string) error {
	i := 0
	var bad error
	for p.out.Scan() {
		if bad != nil {
			continue
		}
		l := p.out.Text()
		if i >= len(want) {
			bad = fmt.Errorf("line %d past the live stream's end: %s", i+1, l)
			continue
		}
		if l != want[i] {
			bad = fmt.Errorf("line %d differs from the live node's:\n got %s\nwant %s", i+1, l, want[i])
			p.cmd.Process.Signal(syscall.SIGTERM)
			continue
		}
		i++
		if i == len(want) {
			p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	err := p.cmd.Wait()
	switch {
	case bad != nil:
		return bad
	case err != nil:
		return fmt.Errorf("exit: %v\n%s", err, p.stderr.String())
	case i != len(want):
		return fmt.Errorf("printed %d lines, want %d", i, len(want))
	}
	return nil
}

// TestCLI_Tier2RewindsSurviveReplayerKills: two tier-1 replayers follow
// the stream; two tier-2 replayers (--tier 2 --gossip) follow a tier-1
// one over TCP. Twenty tails rewind from seq 1 at once from the tier-2
// replayer gossip selects (`seqd tail --from 1 --gossip`, no address),
// held mid-rewind by their unread output while the stream goes on. The
// tier-1 replayer the other tier-2 one follows is SIGKILLed while it
// serves it (it moves to the other tier 1 and resumes with no gap), then
// the tier-2 replayer serving the tails is SIGKILLed (they move to the
// other tier 2 by gossip). Every tail prints the whole stream, line for
// line equal to what a live tail printed, and so does seqd replay of the
// surviving tier-2 replayer.
func TestCLI_Tier2RewindsSurviveReplayerKills(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	mc := groups(4747)
	net := udpArgs(mc)
	seq, seqLines, seqErr := startSequencer(t, ctx, bin, append([]string{"--sequencer.max-packet-bytes", "1472"}, net...))

	// The live stream as a tail that was there from the start prints it.
	live := startTail(t, ctx, bin, append([]string{"--from", "1"}, net...))
	var liveMu sync.Mutex
	var liveLines []string
	liveDone := make(chan struct{})
	go func() {
		defer close(liveDone)
		for live.out.Scan() {
			liveMu.Lock()
			liveLines = append(liveLines, live.out.Text())
			liveMu.Unlock()
		}
	}()

	rewindOf := map[*replayerProc]string{}
	replayer := func(name string, extra ...string) *replayerProc {
		rw := freeTCPAddr(t)
		args := append([]string{"--dir", t.TempDir(), "--nak-addr", freeUDPAddr(t), "--rewind-addr", rw,
			"--gossip.name", name}, extra...)
		p := startReplayer(t, ctx, bin, append(args, net...))
		rewindOf[p] = rw
		return p
	}
	r1a := replayer("r1a", "--gossip.bind", "127.0.0.1:0")
	seed := gossipAddr(t, r1a.ready)
	r1b := replayer("r1b", "--gossip", seed)
	t2 := map[string]*replayerProc{
		"t2a": replayer("t2a", "--gossip", seed, "--tier", "2"),
		"t2b": replayer("t2b", "--gossip", seed, "--tier", "2"),
	}
	for _, p := range t2 {
		if !strings.Contains(p.ready, "tier=2 upstream=gossip") {
			t.Fatalf("tier-2 ready line: %q", p.ready)
		}
	}

	load := func(count int) uint64 {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "LOAD", "--count", fmt.Sprint(count),
			"--size", "1400", "--rate", "25000", "--node.window", "1024"}, net...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("load node: %v\n%s", err, out)
		}
		s := string(out)
		return field(t, s[strings.Index(s, "node: ok"):], "last_seq")
	}
	first := load(30_000)

	// Wait until both tier-2 replayers hold the stream and gossip says
	// so: a probe tail selects one (and rewinds its last seq from it).
	for _, name := range []string{"t2a", "t2b"} {
		for probe := time.Now().Add(30 * time.Second); ; {
			pctx, pcancel := context.WithTimeout(ctx, 20*time.Second)
			cmd := exec.CommandContext(pctx, bin, append([]string{"tail", "--from", fmt.Sprint(first), "--count", "1",
				"--rewind", rewindOf[t2[name]]}, net...)...)
			out, err := cmd.CombinedOutput()
			pcancel()
			if err != nil {
				t.Fatalf("probe %s: %v\n%s\n%s:\n%s", name, err, out, name, t2[name].stderr.String())
			}
			cmd = exec.CommandContext(ctx, bin, append([]string{"tail", "--from", "1", "--count", "1", "--gossip", seed}, net...)...)
			out, err = cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("gossip probe: %v\n%s", err, out)
			}
			if strings.Contains(string(out), "name=t2") {
				break
			}
			if time.Now().After(probe) {
				t.Fatalf("gossip shows no tier-2 replayer holding seq 1:\n%s", out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	// Twenty rewinds from seq 1, from whichever tier-2 replayer gossip
	// selects once it shows one holding seq 1 (it refreshes every second).
	const tails = 20
	var ts []*tailProc
	for i := 0; i < tails; i++ {
		ts = append(ts, startTail(t, ctx, bin, append([]string{"--from", "1", "--gossip", seed, "--gossip.wait", "30s"}, net...)))
	}
	chosen := map[string]int{}
	deadline := time.Now().Add(40 * time.Second)
	for _, p := range ts {
		for !strings.Contains(p.stderr.String(), "gossip: replayer selected") {
			if time.Now().After(deadline) {
				t.Fatalf("a tail selected no replayer:\n%s", p.stderr.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, name := range []string{"t2a", "t2b", "r1a", "r1b"} {
			if strings.Contains(p.stderr.String(), "name="+name+" ") {
				chosen[name]++
			}
		}
	}
	victim := "t2a"
	if chosen["t2b"] > chosen["t2a"] {
		victim = "t2b"
	}
	if chosen["t2a"]+chosen["t2b"] != tails {
		t.Fatalf("the tails chose %v, want tier-2 replayers only", chosen)
	}
	t.Logf("tails chose %v; %s dies", chosen, victim)

	survivor := t2["t2a"]
	if victim == "t2a" {
		survivor = t2["t2b"]
	}

	// The stream goes on; the tier-1 replayer the surviving tier-2 one
	// follows dies while it serves it (and maybe the victim).
	loadDone := make(chan uint64, 1)
	go func() { loadDone <- load(5_000) }()
	time.Sleep(300 * time.Millisecond)
	logs := survivor.stderr.String()
	const following = `msg="tier 2: following upstream replayer" upstream=`
	i := strings.LastIndex(logs, following)
	if i < 0 {
		t.Fatalf("%s follows no upstream:\n%s", victim, logs)
	}
	upstream := strings.Fields(logs[i+len(following):])[0]
	dead1 := r1a
	if upstream == rewindOf[r1b] {
		dead1 = r1b
	}
	if err := dead1.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = dead1.cmd.Wait()
	last := <-loadDone

	// The tier-2 replayer serving the held tails dies.
	if err := t2[victim].cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = t2[victim].cmd.Wait()

	// The live tail has printed the whole stream once it printed seq last.
	for waitLive := time.Now().Add(20 * time.Second); time.Now().Before(waitLive); time.Sleep(20 * time.Millisecond) {
		liveMu.Lock()
		n := len(liveLines)
		liveMu.Unlock()
		if uint64(n) >= last {
			break
		}
	}
	live.cmd.Process.Signal(syscall.SIGTERM)
	<-liveDone
	if err := live.cmd.Wait(); err != nil {
		t.Fatalf("live tail: %v\n%s", err, live.stderr.String())
	}
	if uint64(len(liveLines)) < last {
		t.Fatalf("the live tail printed %d lines, want %d", len(liveLines), last)
	}
	want := liveLines[:last]

	var wg sync.WaitGroup
	errs := make([]error, tails)
	for i, p := range ts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.drain(want)
		}()
	}
	wg.Wait()
	failovers := 0
	for i, err := range errs {
		if err != nil {
			t.Errorf("tail %d: %v", i, err)
		}
		failovers += strings.Count(ts[i].stderr.String(), "resuming from another")
	}
	if failovers < chosen[victim] {
		t.Errorf("%d rewind failovers logged, want at least %d (the tails on %s)", failovers, chosen[victim], victim)
	}
	t.Logf("%d tails printed seqs 1..%d equal to the live tail's; %d rewind failovers", tails, last, failovers)

	// seqd replay HOST:PORT replays the surviving tier-2 replayer's
	// stream as the live tail printed it, all of it or a range.
	for _, r := range []struct{ from, to uint64 }{{0, 0}, {1000, 2000}} {
		args := []string{"replay", "--format", "json", rewindOf[survivor]}
		if r.to != 0 {
			args = append(args, "--from", fmt.Sprint(r.from), "--to", fmt.Sprint(r.to))
		}
		cmd := exec.CommandContext(ctx, bin, args...)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("seqd %v: %v\n%s", args, err, stderr.String())
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		exp := want
		if r.to != 0 {
			exp = want[r.from-1 : r.to]
		}
		if len(lines) != len(exp) {
			t.Fatalf("seqd %v printed %d lines, want %d\n%s", args, len(lines), len(exp), stderr.String())
		}
		for i := range exp {
			if lines[i] != exp[i] {
				t.Fatalf("seqd %v line %d:\n got %s\nwant %s", args, i+1, lines[i], exp[i])
			}
		}
		t.Logf("seqd %v: %s", args, strings.TrimSpace(stderr.String()))
	}

	// The surviving tier-2 replayer lost its upstream too if it followed
	// the tier-1 one that died: it moved to the other.
	if logs := survivor.stderr.String(); !strings.Contains(logs, "upstream replayer failed; following another") ||
		strings.LastIndex(logs, following+rewindOf[dead1]) > strings.LastIndex(logs, following) {
		t.Errorf("the surviving tier-2 replayer did not move from the dead tier-1 one:\n%s", logs)
	}

	// The surviving replayers hold the whole stream; the tier-2 one
	// through the death of the tier-1 one it may have followed.
	for name, p := range map[string]*replayerProc{"t2a": t2["t2a"], "t2b": t2["t2b"], "r1a": r1a, "r1b": r1b} {
		if name == victim || p == dead1 {
			continue
		}
		stopped := p.stop(t)
		t.Logf("%s: %s", name, stopped)
		if c := field(t, stopped, "contiguous"); c != last {
			t.Errorf("%s holds up to seq %d, want %d", name, c, last)
		}
	}
	stopSequencer(t, seq, seqLines, seqErr)
}
