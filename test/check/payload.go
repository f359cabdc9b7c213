package check

import (
	"bytes"
	"encoding/binary"
)

// pattern[j] = byte(j), for 256 starts and a 64 KiB window: a
// payload's bytes are windows of it, so filling and checking one are
// copies and compares (a loop per byte cost a throughput node 20% of its
// CPU).
var pattern = func() []byte {
	b := make([]byte, 256+PayloadChunk)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// PayloadChunk is the period of the pattern, a multiple of 256, so that successive windows continue
// one another.
const PayloadChunk = 64 << 10

// window is bytes off..off+n (n <= PayloadChunk, off a multiple of
// PayloadChunk or within the first PayloadChunk) of command cmd's pattern.
func window(cmd uint64, off, n int) []byte {
	start := int(byte(cmd) + byte(off))
	return pattern[start : start+n]
}

// FillPayload writes the command number and a pattern derived from it
// (byte i is byte(cmd)+byte(i)), so the sender can verify its own messages
// end to end.
func FillPayload(p []byte, cmd uint64) {
	for off := 0; off < len(p); off += PayloadChunk {
		n := min(len(p)-off, PayloadChunk)
		copy(p[off:off+n], window(cmd, off, n))
	}
	if len(p) >= 8 {
		binary.LittleEndian.PutUint64(p, cmd)
	}
}

// PayloadOK says whether p is command cmd's FillPayload pattern.
func PayloadOK(p []byte, cmd uint64) bool {
	from := 0
	if len(p) >= 8 {
		if binary.LittleEndian.Uint64(p) != cmd {
			return false
		}
		from = 8
	}
	for off := 0; off < len(p); off += PayloadChunk {
		n := min(len(p)-off, PayloadChunk)
		lo := max(from-off, 0)
		if lo < n && !bytes.Equal(p[off+lo:off+n], window(cmd, off, n)[lo:]) {
			return false
		}
	}
	return true
}
