package cluster

import (
	"bytes"
	"testing"
)

// FuzzDecodeFetchRequest: a request that decodes re-encodes to the same
// bytes, and its range is valid.
func FuzzDecodeFetchRequest(f *testing.F) {
	f.Add(appendFetchRequest(nil, 1, 100))
	f.Add(appendFetchRequest(nil, 7, 7))
	f.Add(appendFetchRequest(nil, 9, 3))
	f.Add([]byte("SQFQ"))
	f.Fuzz(func(t *testing.T, b []byte) {
		from, to, err := decodeFetchRequest(b)
		if err != nil {
			return
		}
		if from == 0 || to < from {
			t.Fatalf("decoded an invalid range %d..%d", from, to)
		}
		if out := appendFetchRequest(nil, from, to); !bytes.Equal(out, b) {
			t.Fatalf("%x decodes to %d..%d but re-encodes as %x", b, from, to, out)
		}
	})
}

// FuzzDecodeFetchHeader: a header that decodes re-encodes to the same
// bytes and never declares more than a packet frame may hold.
func FuzzDecodeFetchHeader(f *testing.F) {
	for _, h := range []struct {
		kind byte
		n    int
	}{{fetchPacket, 100}, {fetchEnd, 8}, {fetchError, 20}, {fetchPacket, 0}, {4, 1}} {
		b := make([]byte, fetchHeaderBytes)
		putFetchHeader(b, h.kind, h.n)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, n, err := decodeFetchHeader(b)
		if err != nil {
			return
		}
		if n < 0 || n > 1<<20 {
			t.Fatalf("header declares %d bytes", n)
		}
		out := make([]byte, fetchHeaderBytes)
		putFetchHeader(out, kind, n)
		if !bytes.Equal(out, b) {
			t.Fatalf("%x decodes to kind %d len %d but re-encodes as %x", b, kind, n, out)
		}
	})
}
