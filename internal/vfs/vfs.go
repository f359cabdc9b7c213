package vfs

import (
	"io"
	"io/fs"
	"os"
)

// File is an open file: what a segment file of the store needs.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes the file's contents durable (fsync).
	Sync() error
	// Truncate changes the file's size (a torn tail is cut with it).
	Truncate(size int64) error
	// Stat describes the file; the store reads its Size.
	Stat() (fs.FileInfo, error)
}

// FS is the file system the store lives on. Every method takes paths as
// package os does.
type FS interface {
	// Create makes a new file, open for reading and writing; it fails
	// (fs.ErrExist) when name exists, so a segment is never overwritten.
	Create(name string, perm fs.FileMode) (File, error)
	// Open opens an existing file read-only.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// OpenDir opens a directory so that its entries can be made durable
	// with Sync (after a create or remove in it).
	OpenDir(name string) (File, error)
	// Remove deletes a file.
	Remove(name string) error
	// MkdirAll makes a directory and its missing parents.
	MkdirAll(dir string, perm fs.FileMode) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(dir string) ([]fs.DirEntry, error)
}

// Default is the operating system's file system.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string, perm fs.FileMode) (File, error) {
	return osFile(os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm))
}

func (osFS) Open(name string) (File, error) { return osFile(os.Open(name)) }

func (osFS) OpenReadWrite(name string) (File, error) { return osFile(os.OpenFile(name, os.O_RDWR, 0)) }

func (osFS) OpenDir(name string) (File, error) { return osFile(os.Open(name)) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) MkdirAll(dir string, perm fs.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) ReadDir(dir string) ([]fs.DirEntry, error) { return os.ReadDir(dir) }

// osFile returns a nil File on error, not a File holding a nil *os.File
// (which would compare unequal to nil).
func osFile(f *os.File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return f, nil
}
