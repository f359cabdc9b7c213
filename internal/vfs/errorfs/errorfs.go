package errorfs

import (
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"strings"
	"sync"
	"syscall"

	"github.com/seqd/seqd/internal/vfs"
)

// errIO is the error of a rule with none.
var errIO error = syscall.EIO

// Op names a call of vfs.FS or vfs.File.
type Op uint8

// The calls a Rule can fail.
const (
	OpCreate Op = iota + 1
	OpOpen
	OpOpenReadWrite
	OpOpenDir
	OpRemove
	OpMkdirAll
	OpReadDir
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpStat
	OpClose
)

var opNames = [...]string{OpCreate: "create", OpOpen: "open", OpOpenReadWrite: "open", OpOpenDir: "open",
	OpRemove: "remove", OpMkdirAll: "mkdir", OpReadDir: "readdir", OpRead: "read", OpWrite: "write",
	OpSync: "sync", OpTruncate: "truncate", OpStat: "stat", OpClose: "close"}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Rule says which calls fail and how.
type Rule struct {
	Op Op
	// Path, when not empty, limits the rule to files whose name contains
	// it ("seg" for the segment files, "" for every file).
	Path string
	// After matching calls go through before the first failure.
	After int
	// Times is how many matching calls fail from then on: 0 means one,
	// -1 every one.
	Times int
	// Prob, when above 0, makes each matching call past After fail with
	// this probability (the FS's seeded source) instead of always.
	Prob float64
	// Err is the error wrapped (syscall.ENOSPC, syscall.EIO, ...); nil
	// means io.ErrShortWrite for a short write, else syscall.EIO.
	Err error
	// Short (OpWrite): write the first half of the bytes, then fail.
	Short bool
}

type rule struct {
	Rule
	seen   int // matching calls so far
	failed int // calls failed so far
}

// FS is a vfs.FS whose calls fail as its rules say.
type FS struct {
	inner vfs.FS

	mu       sync.Mutex
	rules    []*rule
	rng      *rand.Rand
	injected int
}

// Wrap returns inner behind an FS with no rules yet; seed drives the
// rules with a probability.
func Wrap(inner vfs.FS, seed uint64) *FS {
	return &FS{inner: inner, rng: rand.New(rand.NewPCG(seed, 0x5eed))}
}

// Add arms a rule; its counts start now.
func (f *FS) Add(r Rule) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = append(f.rules, &rule{Rule: r})
}

// Clear disarms every rule.
func (f *FS) Clear() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.rules = nil
}

// Injected is the number of calls failed so far.
func (f *FS) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// inject returns the rule that fails this call, or nil.
func (f *FS) inject(op Op, name string) *Rule {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.rules {
		if r.Op != op || (r.Path != "" && !strings.Contains(name, r.Path)) {
			continue
		}
		r.seen++
		times := r.Times
		if times == 0 {
			times = 1
		}
		if r.seen <= r.After || (times > 0 && r.failed >= times) {
			continue
		}
		if r.Prob > 0 && f.rng.Float64() >= r.Prob {
			continue
		}
		r.failed++
		f.injected++
		return &r.Rule
	}
	return nil
}

// err is the injected error for op on name.
func (r *Rule) err(op Op, name string) error {
	e := r.Err
	if e == nil {
		e = errIO
		if r.Short {
			e = io.ErrShortWrite
		}
	}
	return &fs.PathError{Op: op.String(), Path: name, Err: e}
}

func (f *FS) Create(name string, perm fs.FileMode) (vfs.File, error) {
	if r := f.inject(OpCreate, name); r != nil {
		return nil, r.err(OpCreate, name)
	}
	in, err := f.inner.Create(name, perm)
	return f.wrap(name, in, err)
}

func (f *FS) Open(name string) (vfs.File, error) {
	if r := f.inject(OpOpen, name); r != nil {
		return nil, r.err(OpOpen, name)
	}
	in, err := f.inner.Open(name)
	return f.wrap(name, in, err)
}

func (f *FS) OpenReadWrite(name string) (vfs.File, error) {
	if r := f.inject(OpOpenReadWrite, name); r != nil {
		return nil, r.err(OpOpenReadWrite, name)
	}
	in, err := f.inner.OpenReadWrite(name)
	return f.wrap(name, in, err)
}

func (f *FS) OpenDir(name string) (vfs.File, error) {
	if r := f.inject(OpOpenDir, name); r != nil {
		return nil, r.err(OpOpenDir, name)
	}
	in, err := f.inner.OpenDir(name)
	return f.wrap(name, in, err)
}

func (f *FS) Remove(name string) error {
	if r := f.inject(OpRemove, name); r != nil {
		return r.err(OpRemove, name)
	}
	return f.inner.Remove(name)
}

func (f *FS) MkdirAll(dir string, perm fs.FileMode) error {
	if r := f.inject(OpMkdirAll, dir); r != nil {
		return r.err(OpMkdirAll, dir)
	}
	return f.inner.MkdirAll(dir, perm)
}

func (f *FS) ReadDir(dir string) ([]fs.DirEntry, error) {
	if r := f.inject(OpReadDir, dir); r != nil {
		return nil, r.err(OpReadDir, dir)
	}
	return f.inner.ReadDir(dir)
}

// wrap puts an opened file behind the FS's rules.
func (f *FS) wrap(name string, inner vfs.File, err error) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &file{fs: f, inner: inner, name: name}, nil
}

// file is a vfs.File whose calls fail as its FS's rules say.
type file struct {
	fs    *FS
	inner vfs.File
	name  string
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if r := f.fs.inject(OpRead, f.name); r != nil {
		return 0, r.err(OpRead, f.name)
	}
	return f.inner.ReadAt(p, off)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	r := f.fs.inject(OpWrite, f.name)
	if r == nil {
		return f.inner.WriteAt(p, off)
	}
	if !r.Short {
		return 0, r.err(OpWrite, f.name)
	}
	n, err := f.inner.WriteAt(p[:len(p)/2], off)
	if err != nil {
		return n, err
	}
	return n, r.err(OpWrite, f.name)
}

func (f *file) Sync() error {
	if r := f.fs.inject(OpSync, f.name); r != nil {
		return r.err(OpSync, f.name)
	}
	return f.inner.Sync()
}

func (f *file) Truncate(size int64) error {
	if r := f.fs.inject(OpTruncate, f.name); r != nil {
		return r.err(OpTruncate, f.name)
	}
	return f.inner.Truncate(size)
}

func (f *file) Stat() (fs.FileInfo, error) {
	if r := f.fs.inject(OpStat, f.name); r != nil {
		return nil, r.err(OpStat, f.name)
	}
	return f.inner.Stat()
}

// Close always closes the file underneath, also when it reports an
// injected error (as close(2) does).
func (f *file) Close() error {
	err := f.inner.Close()
	if r := f.fs.inject(OpClose, f.name); r != nil {
		return r.err(OpClose, f.name)
	}
	return err
}
