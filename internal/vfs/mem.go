package vfs

import (
	"io"
	"io/fs"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// MemFS is an in-memory FS that models what a power loss keeps.
//
// Each file has its contents as reads see them (the page cache) and its
// contents as of its last File.Sync; each directory has its entries now
// and its entries as of its last Sync (a directory opened with OpenDir).
// CrashClone keeps only the synced side of both: a file created but
// whose directory was never synced is gone, a removed one whose removal
// was never synced is back with its last synced contents, and every
// write after a file's last Sync is undone. Directories made by MkdirAll
// are durable at once (the store makes its directory once, before any
// file in it, and a crash before that leaves nothing to lose).
//
// Paths are cleaned; "/a/b" and "a/b" name the same file. The zero
// MemFS is not usable: call NewMem.
type MemFS struct {
	mu   sync.Mutex
	root *memNode
}

type memNode struct {
	mode fs.FileMode // fs.ModeDir for a directory

	// A file: data is what reads see, synced what the last Sync made
	// durable; bytes from dirtyFrom on may differ between the two.
	data      []byte
	synced    []byte
	dirtyFrom int

	// A directory: its entries now and at its last Sync.
	children map[string]*memNode
	durable  map[string]*memNode
}

func newDir() *memNode {
	return &memNode{mode: fs.ModeDir | 0o755, children: map[string]*memNode{}, durable: map[string]*memNode{}}
}

func (n *memNode) isDir() bool { return n.mode.IsDir() }

// NewMem returns an empty MemFS (its root directory exists).
func NewMem() *MemFS { return &MemFS{root: newDir()} }

// split cleans name into its components ("." and "/" are the root).
func split(name string) []string {
	c := strings.TrimPrefix(filepath.ToSlash(filepath.Clean(name)), "/")
	if c == "." || c == "" {
		return nil
	}
	return strings.Split(c, "/")
}

// walk returns the node at parts, or nil (fs.mu held).
func (m *MemFS) walk(parts []string) *memNode {
	n := m.root
	for _, p := range parts {
		if !n.isDir() {
			return nil
		}
		if n = n.children[p]; n == nil {
			return nil
		}
	}
	return n
}

// parent returns the directory that holds name and name's base (fs.mu
// held).
func (m *MemFS) parent(op, name string) (*memNode, string, error) {
	parts := split(name)
	if len(parts) == 0 {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	d := m.walk(parts[:len(parts)-1])
	if d == nil || !d.isDir() {
		return nil, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return d, parts[len(parts)-1], nil
}

// Create makes a new file (FS).
func (m *MemFS) Create(name string, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("open", name)
	if err != nil {
		return nil, err
	}
	if d.children[base] != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	}
	n := &memNode{mode: perm.Perm()}
	d.children[base] = n
	return &memFile{m: m, n: n, name: name, write: true}, nil
}

// Open opens a file or directory read-only (FS).
func (m *MemFS) Open(name string) (File, error) { return m.open("open", name, false) }

// OpenReadWrite opens a file for reading and writing (FS).
func (m *MemFS) OpenReadWrite(name string) (File, error) { return m.open("open", name, true) }

// OpenDir opens a directory for Sync (FS).
func (m *MemFS) OpenDir(name string) (File, error) {
	f, err := m.open("open", name, false)
	if err == nil && !f.(*memFile).n.isDir() {
		return nil, &fs.PathError{Op: "open", Path: name, Err: syscall.ENOTDIR}
	}
	return f, err
}

func (m *MemFS) open(op, name string, write bool) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.walk(split(name))
	switch {
	case n == nil:
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	case write && n.isDir():
		return nil, &fs.PathError{Op: op, Path: name, Err: syscall.EISDIR}
	}
	return &memFile{m: m, n: n, name: name, write: write}, nil
}

// Remove deletes a file or an empty directory (FS). Open Files of it go
// on working, as on Unix.
func (m *MemFS) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, base, err := m.parent("remove", name)
	if err != nil {
		return err
	}
	n := d.children[base]
	switch {
	case n == nil:
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	case n.isDir() && len(n.children) > 0:
		return &fs.PathError{Op: "remove", Path: name, Err: syscall.ENOTEMPTY}
	}
	delete(d.children, base)
	return nil
}

// MkdirAll makes dir and its missing parents, durable at once (FS).
func (m *MemFS) MkdirAll(dir string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	for _, p := range split(dir) {
		c := n.children[p]
		if c == nil {
			c = newDir()
			c.mode = fs.ModeDir | perm.Perm()
			n.children[p] = c
			n.durable[p] = c
		} else if !c.isDir() {
			return &fs.PathError{Op: "mkdir", Path: dir, Err: syscall.ENOTDIR}
		}
		n = c
	}
	return nil
}

// ReadDir lists a directory, sorted by name (FS).
func (m *MemFS) ReadDir(dir string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.walk(split(dir))
	switch {
	case n == nil:
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	case !n.isDir():
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: syscall.ENOTDIR}
	}
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make([]fs.DirEntry, len(names))
	for i, name := range names {
		out[i] = fs.FileInfoToDirEntry(n.children[name].info(name))
	}
	return out, nil
}

// CrashClone returns the MemFS a power loss would leave now: every file
// as of its last Sync, every directory with the entries of its last Sync
// (see MemFS). m is unchanged and both go on independently.
func (m *MemFS) CrashClone() *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &MemFS{root: crashCopy(m.root)}
}

func crashCopy(n *memNode) *memNode {
	if !n.isDir() {
		return &memNode{mode: n.mode, data: slices.Clone(n.synced), synced: slices.Clone(n.synced), dirtyFrom: len(n.synced)}
	}
	d := &memNode{mode: n.mode, children: make(map[string]*memNode, len(n.durable)), durable: make(map[string]*memNode, len(n.durable))}
	for name, c := range n.durable {
		cc := crashCopy(c)
		d.children[name], d.durable[name] = cc, cc
	}
	return d
}

func (n *memNode) info(name string) fileInfo {
	return fileInfo{name: path.Base(filepath.ToSlash(name)), size: int64(len(n.data)), mode: n.mode}
}

// memFile is an open File of a MemFS.
type memFile struct {
	m      *MemFS
	n      *memNode
	name   string
	write  bool
	closed bool
}

// check returns why f cannot do op (fs.mu held).
func (f *memFile) check(op string, write bool) error {
	switch {
	case f.closed:
		return &fs.PathError{Op: op, Path: f.name, Err: fs.ErrClosed}
	case f.n.isDir() && op != "sync" && op != "stat" && op != "close":
		return &fs.PathError{Op: op, Path: f.name, Err: syscall.EISDIR}
	case write && !f.write:
		return &fs.PathError{Op: op, Path: f.name, Err: syscall.EBADF}
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("read", false); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "read", Path: f.name, Err: fs.ErrInvalid}
	}
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("write", true); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, &fs.PathError{Op: "write", Path: f.name, Err: fs.ErrInvalid}
	}
	n := f.n
	if end := int(off) + len(p); end > len(n.data) {
		old := len(n.data)
		n.data = slices.Grow(n.data, end-old)[:end]
		clear(n.data[old:]) // a hole reads as zeros, not as truncated bytes
	}
	copy(n.data[off:], p)
	n.dirtyFrom = min(n.dirtyFrom, int(off))
	return len(p), nil
}

// Sync makes the file's contents, or a directory's entries, durable.
func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("sync", false); err != nil {
		return err
	}
	n := f.n
	if n.isDir() {
		clear(n.durable)
		for name, c := range n.children {
			n.durable[name] = c
		}
		return nil
	}
	// Only bytes from dirtyFrom on changed since the last Sync: copy
	// those (appends cost what they added, not the file's size).
	from := min(n.dirtyFrom, len(n.synced), len(n.data))
	n.synced = append(n.synced[:from], n.data[from:]...)
	n.dirtyFrom = len(n.synced)
	return nil
}

func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("truncate", true); err != nil {
		return err
	}
	if size < 0 {
		return &fs.PathError{Op: "truncate", Path: f.name, Err: fs.ErrInvalid}
	}
	n := f.n
	if int(size) <= len(n.data) {
		n.data = n.data[:size]
	} else {
		n.data = append(n.data, make([]byte, int(size)-len(n.data))...)
	}
	n.dirtyFrom = min(n.dirtyFrom, int(size))
	return nil
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check("stat", false); err != nil {
		return nil, err
	}
	return f.n.info(f.name), nil
}

func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return &fs.PathError{Op: "close", Path: f.name, Err: fs.ErrClosed}
	}
	f.closed = true
	return nil
}

// fileInfo describes a MemFS node (fs.FileInfo).
type fileInfo struct {
	name string
	size int64
	mode fs.FileMode
}

func (i fileInfo) Name() string       { return i.name }
func (i fileInfo) Size() int64        { return i.size }
func (i fileInfo) Mode() fs.FileMode  { return i.mode }
func (i fileInfo) ModTime() time.Time { return time.Time{} }
func (i fileInfo) IsDir() bool        { return i.mode.IsDir() }
func (i fileInfo) Sys() any           { return nil }
