package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// writeKeys writes keys to dir/name (mode 0600) and returns its path.
func writeKeys(t *testing.T, dir, name string, keys ...wire.Key) string {
	t.Helper()
	p := filepath.Join(dir, name)
	writeKeysTo(t, p, keys...)
	return p
}

// TestAuth_ForgedFramesAgainstProcesses: a sequencer, a tail, a
// read-only node and a sending node, all with keys, while a host without
// them (this test) forges what issue 16's probe forged: a data datagram
// at the next seq of the live session, a heartbeat of epoch 2^32-1, a
// command under the sending node's account (signed with another
// account's key) and a standby ack. Each is counted
// (seqd_auth_failures_total) and dropped: the tail prints exactly the
// sender's commands, in order, the sender finishes, and the sequencer
// sequenced its commands and no other. The tail loses 5% of its
// datagrams, so its signed NAKs and the sequencer's signed repairs are in
// the run too.
func TestAuth_ForgedFramesAgainstProcesses(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	mc := groups(1616)
	dir := t.TempDir()
	stream := wire.NewKey(1, wire.KeyStream, 0)
	alice := wire.NewKey(10, wire.KeyCommand, wire.MustAccount("ALICE"))
	bob := wire.NewKey(11, wire.KeyCommand, wire.MustAccount("BOB"))
	member := wire.NewKey(20, wire.KeyMember, 0)
	streamFile := writeKeys(t, dir, "stream.keys", stream)
	seqCmdFile := writeKeys(t, dir, "commands.keys", alice, bob)
	aliceFile := writeKeys(t, dir, "alice.keys", alice)
	memberFile := writeKeys(t, dir, "member.keys", member)
	net := append(udpArgs(mc), "--security.stream-key-file", streamFile)

	seqAdmin, roAdmin := freeTCPAddr(t), freeTCPAddr(t)
	seq, lines, seqErr := startSequencer(t, ctx, bin, append([]string{"--admin-addr", seqAdmin, "--session", "4242",
		"--security.command-keys-file", seqCmdFile, "--security.member-key-file", memberFile}, net...))
	if strings.Contains(seqErr.String(), "WITHOUT AUTHENTICATION") {
		t.Fatalf("the sequencer with keys warned it runs without: %s", seqErr.String())
	}

	const count = 3000
	tail := exec.CommandContext(ctx, bin, append([]string{"tail", "--format", "json", "--from", "1", "--internal=false", "--count", fmt.Sprint(count)}, net...)...)
	var tailOut, tailErr bytes.Buffer
	tail.Stdout, tail.Stderr = &tailOut, &tailErr
	// The tail loses 5% of what it receives: its NAKs (signed with the
	// stream key) are answered by the sequencer's signed repairs.
	tail.Env = append(os.Environ(), "SEQD_FAULTS=loss=0.05,seed=7")
	if err := tail.Start(); err != nil {
		t.Fatal(err)
	}
	defer tail.Process.Kill()
	ro := startLineProc(t, ctx, bin, append([]string{"node", "--read-only", "--expect", "1000000000", "--admin-addr", roAdmin}, net...), "read-only", false)
	time.Sleep(300 * time.Millisecond)

	// The attacker listens to the stream (it is not secret) to learn the
	// session, the epoch and the next seq.
	spy, err := multicast.NewClient(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer spy.Close()

	sender := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "ALICE", "--count", fmt.Sprint(count), "--rate", "2000", "--size", "64",
		"--security.command-keys-file", aliceFile}, net...)...)
	var senderOut bytes.Buffer
	sender.Stdout, sender.Stderr = &senderOut, &senderOut
	if err := sender.Start(); err != nil {
		t.Fatal(err)
	}
	defer sender.Process.Kill()

	// A signed heartbeat or packet as the attacker sees it: the prefix
	// says FlagMAC, the header is in the clear.
	var hdr wire.Packet
	deadline := time.Now().Add(10 * time.Second)
	for hdr.FirstSeq < 100 {
		if time.Now().After(deadline) {
			t.Fatal("the spy saw no stream")
		}
		spy.Poll(func(f []byte, _ transport.Peer) {
			if len(f) > wire.AuthTrailerBytes && wire.PacketFlags(f)&wire.FlagMAC != 0 {
				g := append([]byte(nil), f[:len(f)-wire.AuthTrailerBytes]...)
				g[7] &^= 0x80 // wire.FlagMAC, the high bit of the flags
				var p wire.Packet
				if wire.DecodePacket(g, &p) == nil {
					hdr = p
					hdr.FirstSeq = p.LastSeq() + 1
				}
			}
		}, 20*time.Millisecond)
	}

	t.Logf("forging at seq %d, %v", hdr.FirstSeq, time.Now().Format("15:04:05.000"))
	// The forgeries, from an endpoint without keys and one with bob's.
	attacker, err := multicast.NewServer(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.Close()
	buf := make([]byte, 512)
	var w wire.PacketWriter
	for i := uint64(0); i < 5; i++ {
		w.Reset(buf, wire.KindData, hdr.Epoch, hdr.Session, hdr.FirstSeq+i, time.Now().UnixNano(), hdr.EpochStart)
		w.Append(&wire.Record{Time: 1, Account: wire.MustAccount("ALICE"), CmdSeq: 999999, Payload: []byte("forged"), Total: 6})
		attacker.Publish(w.Bytes())
	}
	hb, _ := wire.AppendHeartbeat(make([]byte, 128), 1<<32-1, hdr.Session, hdr.FirstSeq+10, hdr.FirstSeq, time.Now().UnixNano(), hdr.FirstSeq)
	attacker.Publish(hb)
	attacker.Flush()
	bobAuth, _ := wire.NewAuth([]wire.Key{stream, bob}, wire.MustAccount("BOB"))
	bcfg := mc
	bcfg.Auth = bobAuth
	impostor, err := multicast.NewClient(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer impostor.Close()
	var cw wire.CommandWriter
	cw.Reset(make([]byte, 256), wire.MustAccount("ALICE"), 0, 1, hdr.Session)
	cw.Append(&wire.Command{CmdSeq: 1 << 40, Payload: []byte("impostor")})
	if err := impostor.Send(cw.Bytes()); err != nil {
		t.Fatal(err)
	}
	ack, _ := wire.AppendStatus(make([]byte, 128), &wire.Status{Session: hdr.Session, Epoch: hdr.Epoch, Flags: wire.StatusStandby,
		Contiguous: hdr.FirstSeq + 1000, Delivered: hdr.FirstSeq + 1000, Member: 2})
	plain, err := multicast.NewClient(mc)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	plain.Send(ack)
	plain.Flush()
	impostor.Flush()

	if err := sender.Wait(); err != nil {
		t.Fatalf("sender: %v\n%s", err, senderOut.String())
	}
	if want := fmt.Sprintf("node: ok account=ALICE sent=%d acked=%d", count, count); !strings.Contains(senderOut.String(), want) {
		t.Fatalf("sender did not finish as %q:\n%s", want, senderOut.String())
	}
	t.Logf("sender done %v", time.Now().Format("15:04:05.000"))
	if err := tail.Wait(); err != nil {
		t.Fatalf("tail: %v\n%s", err, tailErr.String())
	}
	t.Logf("tail done %v", time.Now().Format("15:04:05.000"))
	if !strings.Contains(tailErr.String(), "FAULT INJECTION ENABLED") {
		t.Fatalf("the tail ran without its faults:\n%s", tailErr.String())
	}
	n := 0
	for _, l := range strings.Split(strings.TrimSpace(tailOut.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("tail line %q: %v", l, err)
		}
		n++
		if m["account"] != "ALICE" || m["cmd_seq"].(float64) != float64(n) || m["epoch"].(float64) != 1 {
			t.Fatalf("tail line %d is not alice's command %d in epoch 1: %q", n, n, l)
		}
	}
	if n != count {
		t.Fatalf("tail printed %d commands, want %d", n, count)
	}
	// Counted where they arrived: the forged stream at the read-only
	// node, the impersonation and the ack at the sequencer.
	var roFail, seqFail float64
	for time.Now().Before(deadline.Add(10 * time.Second)) {
		if resp, err := http.Get("http://" + roAdmin + "/metrics"); err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		} else {
			resp.Body.Close()
		}
		roFail = scrape(t, roAdmin)[`seqd_auth_failures_total{endpoint="stream"}`]
		seqFail = scrape(t, seqAdmin)[`seqd_auth_failures_total{endpoint="stream"}`]
		if roFail >= 6 && seqFail >= 2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if roFail < 6 || seqFail < 2 {
		t.Fatalf("auth failures: read-only node %v (want >= 6: 5 data, 1 heartbeat), sequencer %v (want >= 2: a command, an ack)", roFail, seqFail)
	}
	ro.Kill()
	t.Logf("stopping the sequencer at %v", time.Now().Format("15:04:05.000"))
	if err := seq.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	var stopped string
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "sequencer: stopped") {
			stopped = lines.Text()
		}
	}
	seq.Wait()
	if !strings.Contains(stopped, fmt.Sprintf("commands=%d ", count)) {
		t.Fatalf("sequencer sequenced other than alice's %d commands: %q", count, stopped)
	}
}

// TestAuth_WrongKeyRefused: a node whose stream key is not the
// sequencer's delivers nothing and counts every packet, and one with no
// key for its account does not start, saying why.
func TestAuth_WrongKeyRefused(t *testing.T) {
	bin := seqd(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	mc := groups(1617)
	dir := t.TempDir()
	streamFile := writeKeys(t, dir, "stream.keys", wire.NewKey(1, wire.KeyStream, 0))
	wrongFile := writeKeys(t, dir, "wrong.keys", wire.NewKey(1, wire.KeyStream, 0))
	cmdFile := writeKeys(t, dir, "cmd.keys", wire.NewKey(10, wire.KeyCommand, 0))
	memberFile := writeKeys(t, dir, "member.keys", wire.NewKey(20, wire.KeyMember, 0))
	net := udpArgs(mc)
	seq, lines, seqErr := startSequencer(t, ctx, bin, append([]string{"--security.stream-key-file", streamFile,
		"--security.command-keys-file", cmdFile, "--security.member-key-file", memberFile}, net...))
	defer stopSequencer(t, seq, lines, seqErr)

	out, err := exec.CommandContext(ctx, bin, append([]string{"node", "--account", "EVE", "--count", "1", "--security.stream-key-file", streamFile}, net...)...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--security.command-keys-file must hold command:EVE or command:*") {
		t.Fatalf("node without a command key: %v\n%s", err, out)
	}
	roAdmin := freeTCPAddr(t)
	wrong := startLineProc(t, ctx, bin, append([]string{"node", "--read-only", "--expect", "1000000000", "--admin-addr", roAdmin, "--security.stream-key-file", wrongFile}, net...), "wrong-key", false)
	defer wrong.Kill()
	var fails, delivered float64
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + roAdmin + "/metrics")
		if err != nil {
			continue // not listening yet
		}
		resp.Body.Close()
		m := scrape(t, roAdmin)
		fails, delivered = m[`seqd_auth_failures_total{endpoint="stream"}`], m["seqd_delivered_messages_total"]
		if fails >= 3 {
			break
		}
	}
	t.Logf("counted at %v", time.Now().Format("15:04:05.000"))
	if fails < 3 || delivered != 0 {
		t.Fatalf("a node with the wrong stream key: %v auth failures (want the heartbeats counted), %v delivered (want 0)", fails, delivered)
	}
}
