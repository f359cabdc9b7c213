package fsm

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary bytes to the command decoder: it must return
// an error or a command whose encoding is exactly the input (one encoding
// per command), and applying that command must not panic.
func FuzzDecode(f *testing.F) {
	for _, c := range sampleCommands {
		b, _ := Encode(c)
		f.Add(b)
	}
	f.Add([]byte{1, 4, 0, 0, 0, 0, 0, 0, 0, 1, 1, 200})
	s := build(f, running...)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(c)
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("re-encoding %#v: %x, %v; input %x", c, again, err, b)
		}
		if next, err := s.Apply(1, c); err == nil {
			if verr := next.validate(); verr != nil {
				t.Fatalf("%#v accepted into an invalid state: %v", c, verr)
			}
		}
	})
}

// FuzzDecodeSnapshot feeds arbitrary bytes to the snapshot decoder: an
// error, or a valid state whose encoding is exactly the input.
func FuzzDecodeSnapshot(f *testing.F) {
	f.Add(AppendSnapshot(nil, Initial()))
	f.Add(AppendSnapshot(nil, build(f, running...)))
	f.Add(AppendSnapshot(nil, build(f, append(append([]Command{}, running...), BeginEpoch{Epoch: 2, Primary: 2, PrevCut: 300}, NewSession{Prev: 1})...)))
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(b []byte) {
			s, err := DecodeSnapshot(b)
			if err != nil {
				return
			}
			if verr := s.validate(); verr != nil {
				t.Fatalf("decoded an invalid state: %v", verr)
			}
			if again := AppendSnapshot(nil, s); !bytes.Equal(again, b) {
				t.Fatalf("re-encoding differs: %x vs %x", again, b)
			}
		}
		check(b)
		// Again with the checksum made right, so the fuzzer reaches the
		// decoder behind it.
		if len(b) >= 4 {
			check(withSum(bytes.Clone(b[:len(b)-4])))
		}
	})
}
