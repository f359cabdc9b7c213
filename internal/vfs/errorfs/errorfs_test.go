package errorfs_test

import (
	"errors"
	"io"
	"io/fs"
	"slices"
	"syscall"
	"testing"

	"github.com/seqd/seqd/internal/vfs"
	"github.com/seqd/seqd/internal/vfs/errorfs"
)

func create(t *testing.T, f *errorfs.FS, name string) vfs.File {
	t.Helper()
	file, err := f.Create(name, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	return file
}

// TestFS_FailsTheChosenCalls: a rule fails the matching calls After
// lets through, Times of them, with its error wrapped in a PathError
// naming the call and the file, and leaves the other calls alone.
func TestFS_FailsTheChosenCalls(t *testing.T) {
	m := vfs.NewMem()
	f := errorfs.Wrap(m, 1)
	seg := create(t, f, "/1.seg")
	other := create(t, f, "/other")
	f.Add(errorfs.Rule{Op: errorfs.OpWrite, Path: ".seg", After: 2, Times: 2, Err: syscall.ENOSPC})
	var got []bool
	for i := 0; i < 6; i++ {
		_, err := seg.WriteAt([]byte("x"), int64(i))
		got = append(got, err != nil)
		if err != nil {
			var pe *fs.PathError
			if !errors.Is(err, syscall.ENOSPC) || !errors.As(err, &pe) || pe.Op != "write" || pe.Path != "/1.seg" {
				t.Fatalf("write %d: %v, want ENOSPC naming write and /1.seg", i, err)
			}
		}
		if _, err := other.WriteAt([]byte("x"), int64(i)); err != nil {
			t.Fatalf("a file the rule does not name failed: %v", err)
		}
	}
	if want := []bool{false, false, true, true, false, false}; !slices.Equal(got, want) {
		t.Fatalf("failed writes %v, want %v", got, want)
	}
	if f.Injected() != 2 {
		t.Fatalf("Injected = %d", f.Injected())
	}

	f.Add(errorfs.Rule{Op: errorfs.OpSync, Path: ".seg", Times: -1, Err: syscall.EIO})
	for i := 0; i < 3; i++ {
		if err := seg.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("sync %d = %v, want EIO every time", i, err)
		}
	}
	// A failed fsync does nothing underneath: a power loss keeps none
	// of the file's bytes; once an fsync goes through, it keeps them.
	d, err := f.OpenDir("/")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatal(err)
	}
	d.Close()
	crashed := func() string {
		t.Helper()
		c, err := m.CrashClone().Open("/1.seg")
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, 8)
		n, _ := c.ReadAt(b, 0)
		return string(b[:n])
	}
	if got := crashed(); got != "" {
		t.Fatalf("after failed fsyncs a power loss kept %q", got)
	}
	f.Clear()
	if err := seg.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := crashed(); got != "xx\x00\x00xx" {
		t.Fatalf("after an fsync a power loss kept %q, want only the writes that went through", got)
	}

	f.Add(errorfs.Rule{Op: errorfs.OpCreate, Err: syscall.ENOSPC})
	if _, err := f.Create("/2.seg", 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Create = %v", err)
	}
	if _, err := m.Open("/2.seg"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a failed Create made the file: %v", err)
	}
	create(t, f, "/2.seg") // Times 0 is one failure
}

// TestFS_ShortWrite writes the first half of the bytes and fails.
func TestFS_ShortWrite(t *testing.T) {
	m := vfs.NewMem()
	f := errorfs.Wrap(m, 1)
	file := create(t, f, "/a")
	f.Add(errorfs.Rule{Op: errorfs.OpWrite, Short: true})
	n, err := file.WriteAt([]byte("abcdefgh"), 0)
	if n != 4 || !errors.Is(err, io.ErrShortWrite) {
		t.Fatalf("WriteAt = %d, %v, want 4, a short write", n, err)
	}
	b := make([]byte, 8)
	if n, _ := file.ReadAt(b, 0); string(b[:n]) != "abcd" {
		t.Fatalf("file holds %q", b[:n])
	}
}

// TestFS_ProbabilityIsSeeded: the same seed fails the same calls.
func TestFS_ProbabilityIsSeeded(t *testing.T) {
	run := func(seed uint64) []bool {
		f := errorfs.Wrap(vfs.NewMem(), seed)
		file := create(t, f, "/a")
		f.Add(errorfs.Rule{Op: errorfs.OpSync, Times: -1, Prob: 0.3})
		var out []bool
		for i := 0; i < 200; i++ {
			out = append(out, file.Sync() != nil)
		}
		return out
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Fatal("the same seed failed other calls")
	}
	if slices.Equal(a, c) {
		t.Fatal("another seed failed the same 200 calls")
	}
	n := 0
	for _, x := range a {
		if x {
			n++
		}
	}
	if n < 30 || n > 90 {
		t.Fatalf("%d of 200 calls failed at probability 0.3", n)
	}
}
