package replayer

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"testing"

	"github.com/seqd/seqd/internal/vfs"
	"github.com/seqd/seqd/internal/vfs/errorfs"
)

// TestStore_DiskFaultsLoseNothingAcked: a full disk on a write, a
// failing fsync and a short write each fail the Append that meets them
// with an error naming the call, the file and the cause, fail the store
// (no later Append is taken), and lose nothing acked before: under
// SyncAlways every Append that returned nil was fsynced. After a process
// restart (the same MemFS: the page cache survives) and after a power
// loss (its CrashClone: only what was fsynced survives), Open serves the
// stream up to at least the last acked packet, byte for byte, and the
// store takes the rest of the stream where it ends.
func TestStore_DiskFaultsLoseNothingAcked(t *testing.T) {
	cases := []struct {
		name string
		rule errorfs.Rule
		want []string // in the error's text
		is   error
	}{
		{"ENOSPC on a write", errorfs.Rule{Op: errorfs.OpWrite, Path: ".seg", Err: syscall.ENOSPC},
			[]string{"replayer: write", ".seg", "no space left on device"}, syscall.ENOSPC},
		{"EIO on fsync", errorfs.Rule{Op: errorfs.OpSync, Path: ".seg", Err: syscall.EIO},
			[]string{"replayer: fsync", ".seg", "input/output error"}, syscall.EIO},
		{"short write", errorfs.Rule{Op: errorfs.OpWrite, Path: ".seg", Short: true},
			[]string{"replayer: write", ".seg", "short write"}, io.ErrShortWrite},
		{"ENOSPC creating a segment", errorfs.Rule{Op: errorfs.OpCreate, Path: ".seg", Err: syscall.ENOSPC},
			[]string{"replayer: create segment", ".seg", "no space left on device"}, syscall.ENOSPC},
	}
	st := mixed(1500)
	const dir = "/store"
	for _, tc := range cases {
		for _, after := range []int{0, 3} { // the first matching call, or a later one
			t.Run(fmt.Sprintf("%s/after=%d", tc.name, after), func(t *testing.T) {
				mem := vfs.NewMem()
				efs := errorfs.Wrap(mem, 1)
				cfg := testConfig()
				cfg.Sync = SyncAlways
				cfg.FS = efs
				s, _ := mustOpen(t, dir, cfg)
				k := len(st.pkts) / 3
				appendAll(t, s, st.pkts[:k])
				r := tc.rule
				r.After = after
				efs.Add(r)
				// acked packets; durable is what the store said was
				// durable after the last of them (the highest seq held
				// whole: the packet may end in a fragment).
				acked, durable := k, s.Durable()
				var err error
				for ; acked < len(st.pkts); acked++ {
					if err = s.Append(st.pkts[acked]); err != nil {
						break
					}
					if durable = s.Durable(); durable != s.Contiguous() {
						t.Fatalf("SyncAlways: Durable %d after Append, Contiguous %d", durable, s.Contiguous())
					}
				}
				if err == nil {
					t.Fatalf("no Append failed (%d calls failed)", efs.Injected())
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("Append = %q, want it to say %q", err, w)
					}
				}
				if !errors.Is(err, tc.is) {
					t.Errorf("Append = %v, want errors.Is %v", err, tc.is)
				}
				if s.Durable() != durable {
					t.Errorf("Durable = %d after the failure, was %d", s.Durable(), durable)
				}
				if err := s.Append(st.pkts[acked]); !errors.Is(err, ErrFailed) {
					t.Errorf("Append after the failure = %v, want ErrFailed", err)
				}
				got, _ := collect(s, 1, durable)
				samePackets(t, "Range of the acked seqs on the failed store", got, expected(st.pkts[:acked], 1, durable))
				s.Close()
				efs.Clear()

				for _, reopen := range []struct {
					name string
					fs   vfs.FS
				}{{"restart", mem}, {"power loss", mem.CrashClone()}} {
					cfg := testConfig()
					cfg.FS = reopen.fs
					s, rec, err := Open(dir, cfg)
					if err != nil {
						t.Fatalf("%s: Open: %v", reopen.name, err)
					}
					t.Logf("%s: %v", reopen.name, rec)
					if rec.Corrupt != nil {
						t.Fatalf("%s: Open found corruption: %v", reopen.name, rec.Corrupt)
					}
					if rec.Contiguous < durable {
						t.Fatalf("%s: the store holds seqs up to %d, %d were acked", reopen.name, rec.Contiguous, durable)
					}
					held := int(rec.Packets)
					if held < acked || held > acked+1 {
						t.Fatalf("%s: %d packets held, %d acked, %d appended", reopen.name, held, acked, acked+1)
					}
					got, _ := collect(s, 1, lastSeq(st.pkts[:held]))
					samePackets(t, reopen.name+": Range after Open", got, st.pkts[:held])
					appendAll(t, s, st.pkts[held:])
					checkStore(t, s, st, st.pkts)
					s.Close()
				}
			})
		}
	}
}
