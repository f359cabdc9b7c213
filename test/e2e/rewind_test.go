package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/tlsconf/tlstest"
)

// TestCLI_RewindLateJoin: with the sequencer's ring far too small to
// hold the session, a replayer serves rewinds (--rewind-addr) while a
// node publishes at full rate; `seqd tail --from 1 --rewind` and a late
// `seqd node --rewind` join midway, rewind from seq 1 and merge onto the
// live stream: the tail prints seqs 1..N dense with the publisher's
// commands once and in order, and the node verifies the whole stream
// and exits ok. Over UDP multicast, over TCP, and over TCP with mutual
// TLS everywhere (the stream, the commands and the rewinds; every
// process holds a certificate of one test CA).
func TestCLI_RewindLateJoin(t *testing.T) {
	for _, kind := range []string{"udp", "tcp", "tls"} {
		t.Run(kind, func(t *testing.T) { rewindLateJoin(t, kind) })
	}
}

func rewindLateJoin(t *testing.T, kind string) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var netArgs []string
	if kind == "udp" {
		mc := groups(4343)
		netArgs = udpArgs(mc)
	} else {
		netArgs = []string{"--transport", "tcp", "--tcp.addr", freeTCPAddr(t)}
	}
	if kind == "tls" {
		netArgs = append(netArgs, tlsArgs(tlstest.New(t, "site").Config(t, "node-rewind"))...)
	}
	seq, seqLines, seqErr := startSequencer(t, ctx, bin, append([]string{"--sequencer.max-packet-bytes", "1472", "--sequencer.ring-bytes", "94208"}, netArgs...))
	nak := freeUDPAddr(t)
	if kind != "udp" {
		nak = freeTCPAddr(t)
	}
	rewindAddr := freeTCPAddr(t)
	rep := startReplayer(t, ctx, bin, append([]string{"--dir", t.TempDir(), "--nak-addr", nak, "--rewind-addr", rewindAddr}, netArgs...))

	run := func(args ...string) (string, error) {
		return seqdOutput(ctx, bin, nil, append(args, netArgs...)...)
	}
	const count = 200_000
	loadDone := make(chan error, 1)
	var loadOut string
	go func() {
		out, err := run("node", "--account", "LOAD", "--count", fmt.Sprint(count), "--size", "200", "--node.window", "4096", "--rate", "200000", "--replayer", nak)
		loadOut = out
		loadDone <- err
	}()
	// Join once the stream is well past what the ring holds, while it
	// runs (200k msg/s for a second).
	time.Sleep(300 * time.Millisecond)

	type result struct {
		out string
		err error
	}
	tailc, nodec := make(chan result, 1), make(chan result, 1)
	const tailCount = 100_000
	go func() {
		out, err := run("tail", "--format", "json", "--from", "1", "--count", fmt.Sprint(tailCount), "--rewind", rewindAddr)
		tailc <- result{out, err}
	}()
	go func() {
		out, err := run("node", "--account", "LATE", "--count", "5", "--expect", fmt.Sprint(count), "--rewind", rewindAddr)
		nodec <- result{out, err}
	}()
	if err := <-loadDone; err != nil {
		t.Fatalf("loader: %v\n%s", err, loadOut)
	}
	tr := <-tailc
	if tr.err != nil {
		t.Fatalf("tail --from 1 --rewind: %v\n%s", tr.err, tr.out)
	}
	var seqN uint64
	cmds := 0
	for _, l := range strings.Split(strings.TrimSpace(tr.out), "\n") {
		var m tailed
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("tail line %q: %v", l, err)
		}
		seqN++
		if m.Seq != seqN {
			t.Fatalf("tail: seq %d where %d was due", m.Seq, seqN)
		}
		if m.Account == "LOAD" && m.Type == "" {
			cmds++
			if m.CmdSeq != uint64(cmds) {
				t.Fatalf("tail: command %d of LOAD where %d was due", m.CmdSeq, cmds)
			}
		}
	}
	if seqN != tailCount || cmds < tailCount-100 {
		t.Fatalf("tail printed seqs 1..%d with %d LOAD commands, want 1..%d", seqN, cmds, tailCount)
	}
	nr := <-nodec
	if nr.err != nil || !strings.Contains(nr.out, "node: ok account=LATE sent=5 acked=5") {
		t.Fatalf("late node --rewind: %v\n%s", nr.err, nr.out)
	}
	t.Log(strings.TrimSpace(nr.out[strings.Index(nr.out, "node: ok"):]))

	// A replayer that cannot serve: the error names it.
	if out, err := run("tail", "--from", "1", "--count", "1", "--rewind", freeTCPAddr(t)); err == nil || !strings.Contains(out, "rewind failed") {
		t.Fatalf("tail --rewind to nothing: %v\n%s", err, out)
	}

	t.Log(rep.stop(t))
	stopSequencer(t, seq, seqLines, seqErr)
}
