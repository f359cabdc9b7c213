// Package tlstest makes throwaway certificate authorities and identity
// certificates in a test's temporary directory.
package tlstest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd/internal/tlsconf"
)

// CA is a test's certificate authority, its files in Dir.
type CA struct {
	Dir    string
	CAFile string
	a      *tlsconf.Authority
}

// New makes a CA named name in a new t.TempDir().
func New(t testing.TB, name string) *CA {
	t.Helper()
	a, err := tlsconf.NewAuthority(name, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ca := &CA{Dir: dir, CAFile: filepath.Join(dir, name+"-ca.crt"), a: a}
	if err := a.WriteCA(ca.CAFile); err != nil {
		t.Fatal(err)
	}
	return ca
}

// Config issues a certificate for identity name, valid for a day, and
// returns its files.
func (ca *CA) Config(t testing.TB, name string) tlsconf.Config {
	t.Helper()
	c, err := ca.a.Issue(ca.Dir, name, ca.CAFile, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Identity issues and loads a certificate for name.
func (ca *CA) Identity(t testing.TB, name string) *tlsconf.Identity {
	t.Helper()
	id, err := tlsconf.Load(ca.Config(t, name))
	if err != nil {
		t.Fatal(err)
	}
	return id
}
