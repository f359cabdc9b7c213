package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/test/proc"
)

func build(t *testing.T, dir, pkg, name string) string {
	t.Helper()
	bin := filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

func post(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Post(url, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func getStatus(t *testing.T, addr string) status {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var s status
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestProcesses_PairKilledAndRestarted: `seqd sequencer`, `seqd replayer`,
// two `inventory service` instances and an `inventory front`, as
// processes on loopback TCP. Twenty buyers at once for five phones: five
// 200s, fifteen 409s. Instance 2 is killed (SIGKILL) and more sales go
// on; restarted on its database, it resumes after its flushed seq and
// reaches instance 1's seq and digest; both print the same digest when
// stopped.
func TestProcesses_PairKilledAndRestarted(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dir := t.TempDir()
	seqd := build(t, dir, "github.com/seqd/seqd/cmd/seqd", "seqd")
	inv := build(t, dir, "github.com/seqd/seqd/examples/inventory/cmd/inventory", "inventory")
	addrs, err := freeport.Addrs(6)
	if err != nil {
		t.Fatal(err)
	}
	seqAddr, rewind, front, http1, http2, nak := addrs[0], addrs[1], addrs[2], addrs[3], addrs[4], addrs[5]
	tr := []string{"--transport", "tcp", "--tcp.addr", seqAddr}
	set := proc.NewSet("inventory")
	defer set.StopAll()
	startProc := func(name, bin, ready string, args ...string) *proc.Proc {
		t.Helper()
		p, err := set.Start(ctx, proc.Spec{Name: name, Path: bin, Args: args, MustRun: true})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.WaitLine(ready, 60*time.Second); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, p.Stderr())
		}
		return p
	}
	startProc("sequencer", seqd, "sequencer: ready", append([]string{"sequencer"}, tr...)...)
	startProc("replayer", seqd, "replayer: ready", append(append([]string{"replayer"}, tr...),
		"--dir", filepath.Join(dir, "rep"), "--nak-addr", nak, "--rewind-addr", rewind)...)
	service := func(inst int, httpAddr string) *proc.Proc {
		return startProc(fmt.Sprintf("service-%d", inst), inv, "inventory: ready", append(append([]string{"service"}, tr...),
			"--instance", fmt.Sprint(inst), "--db", "sqlite:"+filepath.Join(dir, fmt.Sprintf("inv-%d.db", inst)),
			"--rewind", rewind, "--http", httpAddr)...)
	}
	s1 := service(1, http1)
	s2 := service(2, http2)
	startProc("front", inv, "inventory: ready", append(append([]string{"front"}, tr...), "--http", front)...)
	base := "http://" + front

	if c := post(t, base+"/restock?key=phone&qty=5"); c != http.StatusOK {
		t.Fatalf("restock: %d", c)
	}
	storm := func(key string, n int) (won, refused int) {
		var mu sync.Mutex
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c := post(t, base+"/reserve?key="+key+"&qty=1")
				mu.Lock()
				defer mu.Unlock()
				switch c {
				case http.StatusOK:
					won++
				case http.StatusConflict:
					refused++
				default:
					t.Errorf("reserve %s: status %d", key, c)
				}
			}()
		}
		wg.Wait()
		return
	}
	if won, refused := storm("phone", 20); won != 5 || refused != 15 {
		t.Fatalf("20 buyers for 5 phones: %d won, %d refused", won, refused)
	}
	// Let instance 2 flush the 21 transactions, then kill it.
	for st := getStatus(t, http2); st.Txns < 21 || st.Flushed < st.Applied; st = getStatus(t, http2) {
		select {
		case <-ctx.Done():
			t.Fatalf("instance 2 did not flush: %+v", st)
		case <-time.After(10 * time.Millisecond):
		}
	}
	flushed := getStatus(t, http2).Flushed
	s2.Kill()
	if c := post(t, base+"/restock?key=tv&qty=2"); c != http.StatusOK {
		t.Fatalf("restock: %d", c)
	}
	if won, refused := storm("tv", 6); won != 2 || refused != 4 {
		t.Fatalf("6 buyers for 2 TVs while instance 2 is down: %d won, %d refused", won, refused)
	}
	s2 = service(2, http2)
	// The buyers subcommand: 10 more for the 2 phones restocked now.
	if c := post(t, base+"/restock?key=phone&qty=2"); c != http.StatusOK {
		t.Fatalf("restock: %d", c)
	}
	out, err := exec.CommandContext(ctx, inv, "buyers", "--url", base, "--buyers", "10", "--keys", "phone").CombinedOutput()
	if err != nil || !regexp.MustCompile(`^buyers: buyers=10 won=2 refused=8 timeouts=0 errors=0 `).Match(out) {
		t.Fatalf("inventory buyers: %v\n%s", err, out)
	}
	var a, b status
	for {
		a, b = getStatus(t, http1), getStatus(t, http2)
		// Every transaction (39) applied by both, at the same seq, flushed:
		// a status is published every 20 ms, so wait for the counts, not
		// for two equal seqs that may both be stale.
		if a.Txns == 39 && b.Txns == 39 && a.Applied == b.Applied && a.Flushed == a.Applied && b.Flushed == b.Applied {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("instance 2 never caught up: %+v, %+v", a, b)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if b.Resumed < flushed || b.Resumed >= a.Applied || a.Digest != b.Digest || a.Txns != b.Txns {
		t.Fatalf("restarted instance: resumed after %d, at seq %d digest %x; instance 1 at %d digest %x", b.Resumed, b.Applied, b.Digest, a.Applied, a.Digest)
	}
	t.Logf("instance 2 resumed after seq %d, caught up at %d, digest %x", b.Resumed, b.Applied, b.Digest)
	s1.Stop()
	s2.Stop()
	re := regexp.MustCompile(`^inventory: stopped service applied=(\d+) digest=([0-9a-f]+)`)
	m1, _ := s1.Find(re, 0) // the line and its submatches
	m2, _ := s2.Find(re, 0)
	if len(m1) != 3 || len(m2) != 3 || m1[1] != m2[1] || m1[2] != m2[2] || m1[2] != fmt.Sprintf("%016x", a.Digest) {
		t.Fatalf("stopped lines %q and %q: want the same seq and digest (%016x)", m1, m2, a.Digest)
	}
}
