package vfs_test

import (
	"bytes"
	"errors"
	"io"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/seqd/seqd/internal/vfs"
)

// each runs f on the operating system's FS (in a temporary directory)
// and on a MemFS: both must behave alike for everything the store calls.
func each(t *testing.T, f func(t *testing.T, fsys vfs.FS, dir string)) {
	t.Run("os", func(t *testing.T) { f(t, vfs.Default, t.TempDir()) })
	t.Run("mem", func(t *testing.T) {
		m := vfs.NewMem()
		if err := m.MkdirAll("/tmp/x", 0o755); err != nil {
			t.Fatal(err)
		}
		f(t, m, "/tmp/x")
	})
}

func readAll(t *testing.T, fsys vfs.FS, name string) []byte {
	t.Helper()
	f, err := fsys.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, fi.Size())
	if n, err := f.ReadAt(b, 0); n != len(b) || (err != nil && err != io.EOF) {
		t.Fatalf("ReadAt(%s) = %d, %v", name, n, err)
	}
	return b
}

func TestFS_FilesAndDirectories(t *testing.T) {
	each(t, func(t *testing.T, fsys vfs.FS, dir string) {
		sub := filepath.Join(dir, "a", "b")
		if err := fsys.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fsys.MkdirAll(sub, 0o755); err != nil {
			t.Fatalf("MkdirAll of an existing directory: %v", err)
		}
		name := filepath.Join(sub, "f")
		f, err := fsys.Create(name, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Create(name, 0o644); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("Create of an existing file = %v, want ErrExist", err)
		}
		if n, err := f.WriteAt([]byte("hello world"), 0); n != 11 || err != nil {
			t.Fatalf("WriteAt = %d, %v", n, err)
		}
		if _, err := f.WriteAt([]byte("W"), 6); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		if err := f.Truncate(5); err != nil {
			t.Fatal(err)
		}
		// Writing past the end leaves a hole of zeros (not the bytes
		// truncated away).
		if _, err := f.WriteAt([]byte("!"), 8); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 20)
		n, err := f.ReadAt(buf, 0)
		if n != 9 || err != io.EOF || !bytes.Equal(buf[:n], []byte("hello\x00\x00\x00!")) {
			t.Fatalf("ReadAt = %d %q, %v", n, buf[:n], err)
		}
		if fi, err := f.Stat(); err != nil || fi.Size() != 9 || fi.Name() != "f" || fi.IsDir() {
			t.Fatalf("Stat = %v, %v", fi, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadAt(buf, 0); err == nil {
			t.Fatal("ReadAt on a closed file succeeded")
		}

		r, err := fsys.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.WriteAt([]byte("x"), 0); err == nil {
			t.Fatal("WriteAt on a file opened read-only succeeded")
		}
		r.Close()
		rw, err := fsys.OpenReadWrite(name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rw.WriteAt([]byte("J"), 0); err != nil {
			t.Fatal(err)
		}
		rw.Close()
		if got := readAll(t, fsys, name); string(got) != "Jello\x00\x00\x00!" {
			t.Fatalf("after OpenReadWrite: %q", got)
		}

		for _, n := range []string{"c", "b2"} {
			f, err := fsys.Create(filepath.Join(sub, n), 0o644)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		ents, err := fsys.ReadDir(sub)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			if !e.Type().IsRegular() {
				t.Fatalf("%s: type %v", e.Name(), e.Type())
			}
			names = append(names, e.Name())
		}
		if len(names) != 3 || names[0] != "b2" || names[1] != "c" || names[2] != "f" {
			t.Fatalf("ReadDir = %v", names)
		}
		if ents, _ := fsys.ReadDir(filepath.Join(dir, "a")); len(ents) != 1 || !ents[0].IsDir() {
			t.Fatalf("ReadDir(a) = %v", ents)
		}
		d, err := fsys.OpenDir(sub)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		d.Close()

		if err := fsys.Remove(filepath.Join(sub, "c")); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove(filepath.Join(sub, "c")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Remove of a removed file = %v", err)
		}
		if _, err := fsys.Open(filepath.Join(sub, "c")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Open of a removed file = %v", err)
		}
		if _, err := fsys.Create(filepath.Join(dir, "nowhere", "f"), 0o644); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("Create in a missing directory = %v", err)
		}
		if _, err := fsys.ReadDir(filepath.Join(dir, "nowhere")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("ReadDir of a missing directory = %v", err)
		}
	})
}

// TestMemFS_CrashCloneKeepsOnlyWhatWasSynced: a power loss keeps a file's
// contents as of its last Sync and a directory's entries as of its last
// Sync, nothing after.
func TestMemFS_CrashCloneKeepsOnlyWhatWasSynced(t *testing.T) {
	m := vfs.NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		t.Fatal(err)
	}
	create := func(name, text string, sync bool) vfs.File {
		t.Helper()
		f, err := m.Create(name, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte(text), 0); err != nil {
			t.Fatal(err)
		}
		if sync {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		return f
	}
	syncDir := func() {
		t.Helper()
		d, err := m.OpenDir("/d")
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		d.Close()
	}
	kept := create("/d/kept", "synced", true)
	create("/d/unsynced", "never synced", false)
	create("/d/removed", "gone", true)
	create("/d/back", "back", true)
	syncDir()
	// After the directory sync: more bytes to kept (unsynced), a new
	// file whose entry is never synced, a removal made durable and one
	// that is not, a truncation never synced.
	if _, err := kept.WriteAt([]byte(" and more"), 6); err != nil {
		t.Fatal(err)
	}
	create("/d/late", "late", true)
	if err := m.Remove("/d/removed"); err != nil {
		t.Fatal(err)
	}
	syncDir()
	if err := m.Remove("/d/back"); err != nil {
		t.Fatal(err)
	}
	create("/d/late2", "late2", true) // entry not synced
	u, _ := m.OpenReadWrite("/d/unsynced")
	u.Truncate(2)

	c := m.CrashClone()
	want := map[string]string{"kept": "synced", "unsynced": "", "late": "late", "back": "back"}
	ents, err := c.ReadDir("/d")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != len(want) {
		t.Fatalf("after the crash: %v, want %v", ents, want)
	}
	for _, e := range ents {
		w, ok := want[e.Name()]
		if !ok {
			t.Fatalf("after the crash: %s is there", e.Name())
		}
		if got := readAll(t, c, "/d/"+e.Name()); string(got) != w {
			t.Fatalf("after the crash: %s holds %q, want %q", e.Name(), got, w)
		}
	}
	// The original goes on unchanged, and the clone independently.
	if got := readAll(t, m, "/d/kept"); string(got) != "synced and more" {
		t.Fatalf("original kept = %q", got)
	}
	f, _ := c.OpenReadWrite("/d/kept")
	f.WriteAt([]byte("S"), 0)
	if got := readAll(t, m, "/d/kept"); string(got) != "synced and more" {
		t.Fatalf("a write to the clone reached the original: %q", got)
	}
	// A second sync of an appended file keeps both parts.
	kept.Sync()
	kept.WriteAt([]byte("!"), 15)
	kept.Sync()
	if got := readAll(t, m.CrashClone(), "/d/kept"); string(got) != "synced and more!" {
		t.Fatalf("after two syncs: %q", got)
	}
}
