package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// TestAuth_KeyReloadOnHangup: a rotation of the stream key under load
// with no restart, in docs/security.md's three steps. A sequencer, a
// sending node and a tail run with stream key 1; key 2 is added
// verify-only to every file (SIGHUP each: all accept it, none signs with
// it), then made a signing key (SIGHUP each, the sequencer first), then
// key 1 is removed (SIGHUP each). A keys file broken on purpose is
// refused at the next SIGHUP and the old keys stay. The tail
// prints exactly the sender's commands in order, and the sender ends
// with every command acked: nothing lost across the rotation.
func TestAuth_KeyReloadOnHangup(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	mc := groups(1717)
	dir := t.TempDir()
	k1, k2 := wire.NewKey(1, wire.KeyStream, 0), wire.NewKey(2, wire.KeyStream, 0)
	alice := wire.NewKey(10, wire.KeyCommand, wire.MustAccount("ALICE"))
	member := wire.NewKey(20, wire.KeyMember, 0)
	seqStream := writeKeys(t, dir, "seq-stream.keys", k1)
	nodeStream := writeKeys(t, dir, "node-stream.keys", k1)
	tailStream := writeKeys(t, dir, "tail-stream.keys", k1)
	cmdFile := writeKeys(t, dir, "commands.keys", alice)
	memberFile := writeKeys(t, dir, "member.keys", member)
	net := udpArgs(mc)

	seq := startLineProc(t, ctx, bin, append([]string{"sequencer", "--session", "4343", "--security.stream-key-file", seqStream,
		"--security.command-keys-file", cmdFile, "--security.member-key-file", memberFile}, net...), "sequencer", false)
	seq.await(t, ctx, regexp.MustCompile(`^sequencer: ready`), 0, "the sequencer's ready line")
	const count = 6000
	tail := startLineProc(t, ctx, bin, append([]string{"tail", "--format", "json", "--from", "1", "--internal=false", "--count", fmt.Sprint(count),
		"--security.stream-key-file", tailStream}, net...), "tail", false)
	time.Sleep(300 * time.Millisecond)
	sender := startLineProc(t, ctx, bin, append([]string{"node", "--account", "ALICE", "--count", fmt.Sprint(count), "--rate", "1500", "--size", "64",
		"--security.stream-key-file", nodeStream, "--security.command-keys-file", cmdFile}, net...), "sender", false)

	reload := func(p *lineProc, what string, want *regexp.Regexp) {
		t.Helper()
		before := strings.Count(p.Stderr(), "security: keys")
		if err := p.Signal(syscall.SIGHUP); err != nil {
			t.Fatalf("SIGHUP %s: %v", p.label, err)
		}
		for deadline := time.Now().Add(10 * time.Second); strings.Count(p.Stderr(), "security: keys") == before; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: no reload logged after SIGHUP (%s):\n%s", p.label, what, tailOf(p.Stderr(), 1500))
			}
		}
		if got := p.Stderr()[strings.LastIndex(p.Stderr(), "security: keys"):]; !want.MatchString(got) {
			t.Fatalf("%s, %s: logged %q, want %s", p.label, what, tailOf(got, 400), want)
		}
	}
	atLeast := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); tail.lineCount() < n; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the tail printed %d lines, want %d", tail.lineCount(), n)
			}
		}
	}
	atLeast(1000)
	// Step 1: key 2 verify-only everywhere: every process accepts it,
	// none signs with it yet.
	k2v := k2
	k2v.VerifyOnly = true
	for _, f := range []string{seqStream, nodeStream, tailStream} {
		writeKeysTo(t, f, k1, k2v)
	}
	reload(sender, "key 2 verify-only", regexp.MustCompile(`keys reloaded.*key_ids="?\[1 2 10\]"? signs_stream=1`))
	reload(tail, "key 2 verify-only", regexp.MustCompile(`keys reloaded.*key_ids="?\[1 2\]"? signs_stream=1`))
	reload(seq, "key 2 verify-only", regexp.MustCompile(`keys reloaded.*signs_stream=1`))
	// Step 2: key 2 signs, process by process (each verifies both).
	for _, f := range []string{seqStream, nodeStream, tailStream} {
		writeKeysTo(t, f, k1, k2)
	}
	reload(seq, "key 2 signs", regexp.MustCompile(`keys reloaded.*signs_stream=2`))
	n := tail.lineCount()
	atLeast(n + 500) // the stream signed with key 2, the receivers' NAKs with key 1
	reload(sender, "key 2 signs", regexp.MustCompile(`keys reloaded.*signs_stream=2`))
	reload(tail, "key 2 signs", regexp.MustCompile(`keys reloaded.*signs_stream=2`))
	// Step 3: key 1 goes.
	for _, f := range []string{seqStream, nodeStream, tailStream} {
		writeKeysTo(t, f, k2)
	}
	reload(tail, "key 1 dropped", regexp.MustCompile(`keys reloaded.*key_ids="?\[2\]`))
	reload(sender, "key 1 dropped", regexp.MustCompile(`keys reloaded.*key_ids="?\[2 10\]`))
	reload(seq, "key 1 dropped", regexp.MustCompile(`keys reloaded.*key_ids="?\[2 10 20\]`))
	n = tail.lineCount()
	atLeast(n + 500)
	// A broken file is refused; the old keys stay.
	if err := os.WriteFile(seqStream, []byte("3 stream not-hex\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reload(seq, "a broken file", regexp.MustCompile(`keys NOT reloaded.*old keys stay`))

	sender.await(t, ctx, regexp.MustCompile(`node: ok account=ALICE sent=6000 acked=6000`), 0, "the sender's ok line")
	<-tail.exited
	lines := tail.output()
	if len(lines) != count {
		t.Fatalf("the tail printed %d messages, want %d", len(lines), count)
	}
	for i, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %d: %v: %q", i, err, l)
		}
		if m["account"] != "ALICE" || m["cmd_seq"].(float64) != float64(i+1) {
			t.Fatalf("line %d is %q, want ALICE's command %d", i, l, i+1)
		}
	}
}

// writeKeysTo replaces the keys file path with keys (mode 0600).
func writeKeysTo(t *testing.T, path string, keys ...wire.Key) {
	t.Helper()
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(wire.FormatKey(k))
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}
