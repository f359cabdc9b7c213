package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// chromium finds a Chromium or Chrome binary; "" when there is none.
func chromium() string {
	if p := os.Getenv("SEQD_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// pageView is what the status page shows in the browser.
type pageView struct {
	Primary, Epoch, Stable string
	At                     string
}

// TestPage_ShowsClusterAndFailover: three `seqd sequencer --cluster`
// processes and a sending node; the status page of a standby, loaded in
// headless Chromium, shows the primary and epoch the members print and a
// stable seq that advances; after a SIGKILL of the primary it shows the
// new primary and epoch within one refresh (1 s) of the new epoch's
// first record. SEQD_PAGE_SCREENSHOT=FILE saves a PNG of the page
// (make page-screenshot: docs/img/status-page.png).
func TestPage_ShowsClusterAndFailover(t *testing.T) {
	chrome := chromium()
	if chrome == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium not found, and CI=true: the browser test must run in CI (.ci/run installs the Debian package chromium; make chromium)")
		}
		t.Skip("chromium not found: install it (apt-get install chromium, or make chromium) to run the status page's browser test")
	}
	bin := seqd(t)
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	net := udpArgs(groups(919))
	r := startCluster(t, ctx, bin, net, "lan")
	first, _, _ := r.primary(ctx, 1)
	_, nodeDone := startBackground(t, exec.CommandContext(ctx, bin, append([]string{"node", "--account", "PAGE", "--count", "200000", "--rate", "1000", "--size", "32", "--timeout", "60s"}, net...)...))
	_ = nodeDone // ended by ctx; the page test checks the page, the cluster tests the stream

	viewer := first.id%3 + 1 // a standby: it survives the kill
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 860), chromedp.Flag("disable-gpu", true))
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	defer acancel()
	bctx, bcancel := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	defer bcancel()
	load := func(id int, query string) {
		url := "http://" + r.admin[id-1] + "/ui/" + query
		if err := chromedp.Do(bctx, chromedp.Navigate(url)); err != nil {
			t.Fatalf("load %s: %v", url, err)
		}
	}
	t.Logf("cluster up at %v", time.Since(t0))
	load(viewer, "")
	t.Logf("page loaded at %v", time.Since(t0))
	read := func() pageView {
		v, err := chromedp.Run(bctx, chromedp.Evaluate[pageView](`({
			Primary: document.getElementById("primary").textContent,
			Epoch: document.getElementById("epoch").textContent,
			Stable: document.getElementById("stable").textContent,
			At: document.body.dataset.at || ""})`))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		return v
	}
	// await polls the page until ok or the deadline; it returns the last view.
	await := func(d time.Duration, what string, ok func(pageView) bool) pageView {
		t.Helper()
		end := time.Now().Add(d)
		for {
			v := read()
			if ok(v) {
				return v
			}
			if time.Now().After(end) {
				t.Fatalf("the page did not show %s within %v: it shows primary=%q epoch=%q stable=%q", what, d, v.Primary, v.Epoch, v.Stable)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	seqOf := func(s string) uint64 { n, _ := strconv.ParseUint(strings.ReplaceAll(s, ",", ""), 10, 64); return n }

	// On a loaded machine raft may change the leader by itself: the page
	// shows the primary and epoch the members print now.
	var old *clusterProc
	var epoch uint64
	shows := func(v pageView) bool {
		old, epoch, _ = r.primary(ctx, 1)
		return v.Primary == fmt.Sprint(old.id) && v.Epoch == fmt.Sprint(epoch)
	}
	v := await(10*time.Second, "the primary and epoch the members print", shows)
	if old.id == viewer {
		// The viewer itself became primary: watch from another member.
		viewer = old.id%3 + 1
		load(viewer, "")
		v = await(10*time.Second, "the primary and epoch the members print", shows)
	}
	s1 := seqOf(v.Stable)
	v = await(5*time.Second, "stable advancing past "+v.Stable, func(v pageView) bool { return seqOf(v.Stable) > s1 })
	t.Logf("page of member %d: primary=%s epoch=%s stable %d -> %s", viewer, v.Primary, v.Epoch, s1, v.Stable)
	// The primary's own view agrees (stable is the primary's, read a
	// moment later: at least what the page showed).
	if st := r.status(ctx, old.id); st == nil || st.Role != "primary" || st.Published < seqOf(v.Stable) {
		t.Fatalf("member %d's status %+v does not agree with the page (stable %s)", old.id, st, v.Stable)
	}
	if path := os.Getenv("SEQD_PAGE_SCREENSHOT"); path != "" {
		png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", path, len(png))
	}

	t.Logf("killing the primary at %v", time.Since(t0))
	killed := time.Now()
	if err := old.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-old.exited
	p, e1, startedNS := r.primaryAfter(ctx, epoch+1, killed.UnixNano())
	refresh := time.Second
	// The browser has a generous bound (a loaded machine renders late);
	// the gathering it shows must come within one refresh (and the time
	// a gathering takes) of the new epoch's first record.
	deadline := time.Until(time.Unix(0, startedNS).Add(refresh + 2*time.Second))
	v = await(max(deadline, 100*time.Millisecond), fmt.Sprintf("primary %d epoch %d", p.id, e1), func(v pageView) bool {
		return v.Primary == fmt.Sprint(p.id) && v.Epoch == fmt.Sprint(e1)
	})
	at, _ := strconv.ParseInt(v.At, 10, 64)
	shownMS := float64(at-startedNS) / 1e6
	t.Logf("after SIGKILL of member %d: the page shows primary=%s epoch=%s (gathered %.0f ms after the epoch's first record; failover took %.1f ms)",
		old.id, v.Primary, v.Epoch, shownMS, float64(startedNS-killed.UnixNano())/1e6)
	if limit := refresh + 800*time.Millisecond; time.Duration(at-startedNS) > limit {
		t.Fatalf("the page showed the new epoch in a gathering %.0f ms after its first record: more than one refresh and a gathering (%v)", shownMS, limit)
	}
	// The polling fallback (?poll) shows the same.
	load(viewer, "?poll")
	await(3*time.Second, fmt.Sprintf("primary %d epoch %d when polling", p.id, e1), func(v pageView) bool {
		return v.Primary == fmt.Sprint(p.id) && v.Epoch == fmt.Sprint(e1)
	})
	unreachable, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector("#members .role-unreachable") !== null`))
	if err != nil {
		t.Fatal(err)
	}
	if !unreachable {
		t.Fatalf("the page does not show killed member %d as unreachable", old.id)
	}
}
