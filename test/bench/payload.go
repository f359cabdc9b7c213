package bench

import (
	"bytes"
	"encoding/binary"
)

// The payload of a bench command, shared by the bench and `seqd node`
// (which sends it and checks its own commands when they come back): the
// command number in the first 8 bytes and a pattern derived from it, so
// that a sender verifies its own messages end to end.

// payloadPattern[j] = byte(j), for 256 starts and a 64 KiB window: a
// payload's bytes are windows of it, so filling and checking one are
// copies and compares (a loop per byte cost a throughput node 20% of its
// CPU).
var payloadPattern = func() []byte {
	b := make([]byte, 256+payloadChunk)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// payloadChunk is a multiple of 256, so that successive windows continue
// one another.
const payloadChunk = 64 << 10

// payloadWindow is bytes off..off+n (n <= payloadChunk, off a multiple of
// payloadChunk or within the first chunk) of command cmd's pattern.
func payloadWindow(cmd uint64, off, n int) []byte {
	start := int(byte(cmd) + byte(off))
	return payloadPattern[start : start+n]
}

// FillPayload writes the command number and a pattern derived from it
// (byte i is byte(cmd)+byte(i)), so the sender can verify its own messages
// end to end. It allocates nothing.
func FillPayload(p []byte, cmd uint64) {
	for off := 0; off < len(p); off += payloadChunk {
		n := min(len(p)-off, payloadChunk)
		copy(p[off:off+n], payloadWindow(cmd, off, n))
	}
	if len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, cmd)
	}
}

// CheckPayload reports whether p is what FillPayload(p, cmd) wrote.
func CheckPayload(p []byte, cmd uint64) bool {
	from := 0
	if len(p) >= 8 {
		if binary.LittleEndian.Uint64(p) != cmd {
			return false
		}
		from = 8
	}
	for off := 0; off < len(p); off += payloadChunk {
		n := min(len(p)-off, payloadChunk)
		lo := max(from-off, 0)
		if lo < n && !bytes.Equal(p[off+lo:off+n], payloadWindow(cmd, off, n)[lo:]) {
			return false
		}
	}
	return true
}
