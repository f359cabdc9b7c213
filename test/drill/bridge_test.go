package drill

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// binDir holds the seqd binary the tests build (removed by TestMain).
var binDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// seqdBinary builds the seqd binary once per test binary.
var seqdBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "seqd-drill-bin")
	if err != nil {
		return "", err
	}
	binDir = dir
	bin := filepath.Join(dir, "seqd")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/seqd/seqd/cmd/seqd").CombinedOutput()
	if err != nil {
		return "", &buildError{err: err, out: string(out)}
	}
	return bin, nil
})

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + ": " + e.out }

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func runBridgeDrill(t *testing.T, cfg BridgeConfig, timeout time.Duration) string {
	t.Helper()
	exe, err := seqdBinary()
	if err != nil {
		t.Fatal(err)
	}
	var out lockedBuffer
	// The logs stay for a failure (the drill prints where); a pass
	// removes them.
	cfg.Exe, cfg.Out, cfg.Keep = exe, &out, true
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err = RunBridge(ctx, cfg)
	t.Log(out.String())
	if err != nil {
		t.Fatal(err)
	}
	if _, dir, ok := strings.Cut(out.String(), "directories and logs kept in "); ok {
		os.RemoveAll(strings.TrimSpace(strings.SplitN(dir, "\n", 2)[0]))
	}
	var last string
	for _, l := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(l, "drill bridge rounds=") {
			last = l
		}
	}
	if !strings.HasPrefix(last, "drill bridge rounds=") || !strings.HasSuffix(last, " lost=0 dup=0 diverged=0") {
		t.Fatalf("last line %q", last)
	}
	return out.String()
}

// Site B's stream equals site A's, with both sites' commands once, while
// the TCP channel is cut and restored, then the UDP channel, then both,
// and while the receiving end, then the sending end, is SIGKILLed and
// started again on its store.
func TestRunBridge_ChannelCutsAndEndRestarts(t *testing.T) {
	cfg := DefaultBridgeConfig()
	cfg.Rounds, cfg.RatePerSecond, cfg.Cut, cfg.Pause = 5, 500, 300*time.Millisecond, 200*time.Millisecond
	out := runBridgeDrill(t, cfg, 2*time.Minute)
	for _, k := range []string{"cut=tcp", "cut=udp", "cut=both", "cut=kill-receive", "cut=kill-send"} {
		if !strings.Contains(out, k) {
			t.Errorf("no round %s", k)
		}
	}
	// The commands of B's sender crossed the bridge.
	if !strings.Contains(out, "commands=") || strings.Contains(out, " commands=0 ") {
		t.Errorf("no commands crossed: %s", out)
	}
}

// With 5% seeded loss on every channel, B's stream still equals A's.
func TestRunBridge_LossOnEveryChannel(t *testing.T) {
	cfg := DefaultBridgeConfig()
	cfg.Rounds, cfg.RatePerSecond, cfg.Cut, cfg.Pause = 1, 500, 200*time.Millisecond, 300*time.Millisecond
	cfg.Faults = "loss=0.05,seed=7"
	runBridgeDrill(t, cfg, 2*time.Minute)
}

func TestBridgeConfig_Validate(t *testing.T) {
	if err := DefaultBridgeConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, edit := range []func(*BridgeConfig){
		func(c *BridgeConfig) { c.Rounds = 0 },
		func(c *BridgeConfig) { c.Sequencers = 2 },
		func(c *BridgeConfig) { c.Faults = "loss=2" },
		func(c *BridgeConfig) { c.Cut = 0 },
		func(c *BridgeConfig) { c.Kinds = []string{"kill-primary"} },
		func(c *BridgeConfig) { c.Kinds = []string{"flood"} },
	} {
		c := DefaultBridgeConfig()
		edit(&c)
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// With two sending and two receiving ends, a SIGKILL of either end of
// the link leaves B's stream going: B is not behind A when the end comes
// back (without the standby it is behind by the whole pause).
func TestRunBridge_RedundantEndsTakeOver(t *testing.T) {
	cfg := DefaultBridgeConfig()
	cfg.Rounds, cfg.RatePerSecond, cfg.Cut, cfg.Pause, cfg.Redundant = 2, 500, 400*time.Millisecond, 200*time.Millisecond, true
	cfg.Kinds = []string{"kill-receive", "kill-send"}
	out := runBridgeDrill(t, cfg, 2*time.Minute)
	// Two senders at 500/s for the 400 ms a killed end is away: 400 seqs
	// behind without the other end.
	re := regexp.MustCompile(`cut=(kill-receive|kill-send) caught_up_ms=\S+ behind_at_restart=(-?\d+)`)
	m := re.FindAllStringSubmatch(out, -1)
	if len(m) != 2 {
		t.Fatalf("%d kill rounds", len(m))
	}
	for _, r := range m {
		if n, _ := strconv.Atoi(r[2]); n > 150 {
			t.Errorf("%s: B was %d seqs behind A while the other end ran", r[1], n)
		}
	}
	// Each kill round times B's stream going on through the other end
	// (the drill fails if it does not within 30 s).
	if !regexp.MustCompile(`drill bridge kills=2 resume_p50_ms=\S+ resume_max_ms=\S+`).MatchString(out) {
		t.Fatalf("no resume line for the two kills:\n%s", out)
	}
}

// With each site's two ends a --pair found by gossip (one active, one
// warm standby), a SIGKILL of the active end makes the standby take
// over: each kill round prints the takeover (SIGKILL to the standby's
// "bridge: active" line), B is not behind A when the killed end comes
// back (as a standby), and the streams are equal.
func TestRunBridge_PairStandbyTakesOver(t *testing.T) {
	cfg := DefaultBridgeConfig()
	cfg.Rounds, cfg.RatePerSecond, cfg.Cut, cfg.Pause, cfg.Pair = 4, 500, 600*time.Millisecond, 200*time.Millisecond, true
	cfg.Kinds = []string{"kill-receive", "kill-send"}
	out := runBridgeDrill(t, cfg, 3*time.Minute)
	re := regexp.MustCompile(`cut=(kill-receive|kill-send) caught_up_ms=\S+ takeover_ms=\S+ behind_at_restart=(-?\d+)`)
	m := re.FindAllStringSubmatch(out, -1)
	if len(m) != 4 {
		t.Fatalf("%d kill rounds with a takeover, want 4:\n%s", len(m), out)
	}
	// Two senders at 500/s for the 600 ms a killed end is away: 600 seqs
	// behind without the standby.
	for _, r := range m {
		if n, _ := strconv.Atoi(r[2]); n > 200 {
			t.Errorf("%s: B was %d seqs behind A with the standby taking over", r[1], n)
		}
	}
	if !regexp.MustCompile(`drill bridge takeovers=4 takeover_p50_ms=\S+ takeover_max_ms=\S+`).MatchString(out) {
		t.Fatalf("no takeover line for the four kills:\n%s", out)
	}
}
