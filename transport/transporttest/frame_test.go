package transporttest

import "testing"

// The suite is only as strict as its frame check: it must notice any byte
// changed, a frame cut short or grown, and report the index it carries.
func TestCheck_DetectsDamage(t *testing.T) {
	for _, index := range []int{0, 1, 77, 1999} {
		frame := fill(make([]byte, frameSize(index)), index)
		if got, err := check(frame); err != nil || got != index {
			t.Fatalf("intact frame %d: check = %d, %v", index, got, err)
		}
		for j := range frame {
			bad := append([]byte(nil), frame...)
			bad[j] ^= 0x40
			if got, err := check(bad); err == nil && got == index {
				t.Fatalf("frame %d with byte %d flipped passed the check", index, j)
			}
		}
		if _, err := check(frame[:len(frame)-1]); err == nil {
			t.Fatalf("frame %d cut by one byte passed the check", index)
		}
		if _, err := check(append(frame, 0)); err == nil {
			t.Fatalf("frame %d grown by one byte passed the check", index)
		}
	}
	if _, err := check([]byte{1, 2, 3}); err == nil {
		t.Fatal("3-byte frame passed the check")
	}
}

// Consecutive frames must differ in their pattern, or a transport that
// delivered frame i's bytes under frame i+1's header would pass.
func TestFill_PatternsDifferBetweenFrames(t *testing.T) {
	a := fill(make([]byte, 200), 5)
	b := fill(make([]byte, 200), 6)
	copy(b[:frameHeader], a[:frameHeader])
	if string(a) == string(b) {
		t.Fatal("frames 5 and 6 have the same pattern")
	}
}
