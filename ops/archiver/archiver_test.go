package archiver

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// storeSink appends a sequencer's data packets to a Store, as a
// replayer does.
type storeSink struct {
	t *testing.T
	s *replayer.Store
}

func (k *storeSink) Publish(pkt []byte) {
	if kind, _ := wire.PeekKind(pkt); kind == wire.KindData {
		if err := k.s.Append(pkt); err != nil {
			k.t.Fatalf("store: %v", err)
		}
	}
}

func (k *storeSink) SendTo(transport.Peer, []byte) {}

// writeSession runs a sequencer Core into a real Store in dir (small
// segments: several files) and returns the last seq.
func writeSession(t *testing.T, dir string, session uint64, n int) uint64 {
	t.Helper()
	scfg := replayer.DefaultConfig()
	scfg.Sync = replayer.SyncNone
	scfg.SegmentBytes = 70_000
	s, _, err := replayer.Open(dir, scfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sequencer.DefaultConfig()
	cfg.Session = session
	c, err := sequencer.NewSinkShell(cfg, &storeSink{t: t, s: s})
	if err != nil {
		t.Fatal(err)
	}
	clock := int64(1_750_000_000_000_000_000)
	acct := wire.MustAccount("alice")
	for i := 1; i <= n; i++ {
		var w wire.CommandWriter
		if err := w.Reset(make([]byte, 8<<10), acct, 0, 1, session); err != nil {
			t.Fatal(err)
		}
		if err := w.Append(&wire.Command{CmdSeq: uint64(i), Payload: bytes.Repeat([]byte{byte(i)}, 100)}); err != nil {
			t.Fatal(err)
		}
		clock += 1000
		now := sequencer.Time{Mono: clock, Wall: clock}
		if err := c.Step(now, w.Bytes(), 1); err != nil {
			t.Fatal(err)
		}
		c.Flush(now)
	}
	last := s.Contiguous()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return last
}

func TestShip_CopiesVerifiesAndIsIdempotent(t *testing.T) {
	src, dest := filepath.Join(t.TempDir(), "s1"), t.TempDir()
	last := writeSession(t, src, 0x4242, 1500)
	res, err := Ship(src, dest)
	if err != nil {
		t.Fatal(err)
	}
	if res.Session != 0x4242 || res.LastSeq != last || res.Files < 2 || res.Copied != res.Files || res.UpToDate {
		t.Fatalf("first ship %+v: want session 4242, last seq %d, every file (>= 2) copied", res, last)
	}
	if res.Dir != filepath.Join(dest, "4242") {
		t.Fatalf("copy in %s, want dest/4242", res.Dir)
	}
	// The copy is an archive of the same session and range.
	s, rec, err := replayer.OpenArchive(res.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if s.Session() != 0x4242 || s.Contiguous() != last || len(rec.Cuts) > 0 || rec.Corrupt != nil {
		t.Fatalf("copy opens as session %x contiguous %d (%s)", s.Session(), s.Contiguous(), rec)
	}
	s.Close()
	// sha256sum agrees with SHA256SUMS, where the tool exists.
	if _, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command("sha256sum", "-c", SumsName)
		cmd.Dir = res.Dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sha256sum -c: %v\n%s", err, out)
		}
	}

	again, err := Ship(src, dest)
	if err != nil || !again.UpToDate || again.Copied != 0 {
		t.Fatalf("second ship %+v %v: want up to date, nothing copied", again, err)
	}

	// A copy damaged at the destination is shipped again (only that file).
	segs, _ := filepath.Glob(filepath.Join(res.Dir, "*.seg"))
	b, _ := os.ReadFile(segs[0])
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	fixed, err := Ship(src, dest)
	if err != nil || fixed.UpToDate || fixed.Copied != 1 {
		t.Fatalf("ship after damage %+v %v: want one file copied again", fixed, err)
	}
	if err := verifyCopy(res.Dir, mustInspect(t, src)); err != nil {
		t.Fatal(err)
	}
}

func mustInspect(t *testing.T, dir string) Manifest {
	t.Helper()
	m, err := inspect(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A session with a torn tail (its writer not finished, or crashed) is
// not shipped.
func TestShip_RefusesTornSession(t *testing.T) {
	src := filepath.Join(t.TempDir(), "s")
	writeSession(t, src, 7, 50)
	segs, _ := filepath.Glob(filepath.Join(src, "*.seg"))
	f, err := os.OpenFile(segs[len(segs)-1], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("half a frame"))
	f.Close()
	if _, err := Ship(src, t.TempDir()); !errors.Is(err, ErrNotArchive) {
		t.Fatalf("Ship of a torn session: %v, want ErrNotArchive", err)
	}
}

// Scan ships the sessions of a directory once they settled; a fresh one
// waits.
func TestScan_SettleThenShip(t *testing.T) {
	root, dest := t.TempDir(), t.TempDir()
	writeSession(t, filepath.Join(root, "a"), 1, 40)
	writeSession(t, filepath.Join(root, "b"), 2, 40)
	if err := os.WriteFile(filepath.Join(root, "notes.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Source, cfg.Dest = root, "file://"+dest
	reps, err := Scan(cfg, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 2 || !reps[0].Pending || !reps[1].Pending {
		t.Fatalf("reports %+v: want two pending sessions (changed within Settle)", reps)
	}
	reps, err = Scan(cfg, time.Now().Add(cfg.Settle))
	if err != nil || Failed(reps) != nil {
		t.Fatalf("scan: %v %v", err, Failed(reps))
	}
	for i, want := range []string{"1", "2"} {
		if reps[i].Pending || reps[i].Result.Copied == 0 || reps[i].Result.Dir != filepath.Join(dest, want) {
			t.Fatalf("report %d: %+v, want session %s shipped", i, reps[i], want)
		}
		if _, err := os.Stat(filepath.Join(dest, want, ManifestName)); err != nil {
			t.Fatal(err)
		}
	}
	// A second scan does not read what did not change since it was
	// shipped (a copy damaged since goes unnoticed); Reverify reads it
	// all again and ships the damaged file again.
	segs, _ := filepath.Glob(filepath.Join(dest, "1", "*.seg"))
	b, _ := os.ReadFile(segs[0])
	b[len(b)-1] ^= 0xff
	if err := os.WriteFile(segs[0], b, 0o644); err != nil {
		t.Fatal(err)
	}
	reps, err = Scan(cfg, time.Now().Add(cfg.Settle))
	if err != nil || Failed(reps) != nil || !reps[0].Result.UpToDate || reps[0].Result.Copied != 0 {
		t.Fatalf("second scan: %+v %v", reps, err)
	}
	cfg.Reverify = true
	reps, err = Scan(cfg, time.Now().Add(cfg.Settle))
	if err != nil || Failed(reps) != nil || reps[0].Result.Copied != 1 || !reps[1].Result.UpToDate {
		t.Fatalf("scan with Reverify: %+v %v: want session 1's damaged file copied again, session 2 up to date", reps, err)
	}

	cfg.Dest = "s3://bucket/x"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "Dest") {
		t.Fatalf("s3 dest: %v", err)
	}
}
