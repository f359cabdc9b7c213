package tcp

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"
)

// chunkReader returns the stream in chunks whose sizes come from sizes
// (cycled), to mimic TCP delivering bytes in arbitrary pieces.
type chunkReader struct {
	data  []byte
	sizes []byte
	i     int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(r.data)
	if len(r.sizes) > 0 {
		n = 1 + int(r.sizes[r.i%len(r.sizes)])
		r.i++
	}
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// splitAll is the reference decoder: the whole stream at once.
func splitAll(stream []byte, maxFrame int) (frames [][]byte, err error) {
	for len(stream) >= lenPrefixBytes {
		n := binary.LittleEndian.Uint32(stream)
		if uint64(n) > uint64(maxFrame) {
			return frames, ErrOversizedFrame
		}
		if len(stream) < lenPrefixBytes+int(n) {
			break
		}
		frames = append(frames, stream[lenPrefixBytes:lenPrefixBytes+int(n)])
		stream = stream[lenPrefixBytes+int(n):]
	}
	return frames, nil
}

// splitChunked decodes the stream as the reader goroutine does.
func splitChunked(r io.Reader, bufBytes, maxFrame int) (frames [][]byte, err error) {
	fr := newFrameReader(bufBytes, maxFrame)
	for {
		for {
			f, err := fr.next()
			if err != nil {
				return frames, err
			}
			if f == nil {
				break
			}
			frames = append(frames, bytes.Clone(f))
		}
		if _, err := fr.fill(r); err != nil {
			if errors.Is(err, io.EOF) {
				return frames, nil
			}
			return frames, err
		}
	}
}

func checkSplit(t *testing.T, stream, sizes []byte, bufBytes, maxFrame int) {
	t.Helper()
	want, wantErr := splitAll(stream, maxFrame)
	got, gotErr := splitChunked(&chunkReader{data: stream, sizes: sizes}, bufBytes, maxFrame)
	if !errors.Is(gotErr, wantErr) && gotErr != wantErr {
		t.Fatalf("error: got %v, want %v", gotErr, wantErr)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d frames, want %d", len(got), len(want))
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Fatalf("frame %d: got %x, want %x", i, got[i], want[i])
		}
	}
}

func streamOf(frames ...[]byte) []byte {
	var b []byte
	for _, f := range frames {
		b = appendFrame(b, f)
	}
	return b
}

func TestFrameReader_Chunks(t *testing.T) {
	big := bytes.Repeat([]byte{7}, 10000) // larger than the 64-byte buffer: it must grow
	stream := streamOf([]byte("a"), nil, []byte("hello"), big, []byte("tail"))
	for _, sizes := range [][]byte{nil, {0}, {1}, {2, 0, 5}, {255}} {
		checkSplit(t, stream, sizes, 64, 1<<16)
	}
}

func TestFrameReader_Oversized(t *testing.T) {
	stream := streamOf([]byte("ok"))
	stream = binary.LittleEndian.AppendUint32(stream, 101)
	stream = append(stream, make([]byte, 101)...)
	got, err := splitChunked(&chunkReader{data: stream, sizes: []byte{3}}, 64, 100)
	if !errors.Is(err, ErrOversizedFrame) {
		t.Fatalf("err = %v, want ErrOversizedFrame", err)
	}
	if len(got) != 1 || string(got[0]) != "ok" {
		t.Fatalf("frames before the bad one: %q", got)
	}
	if err.Error() != "tcp: received frame length exceeds MaxFrameBytes" {
		t.Fatalf("error text %q", err)
	}
}

func FuzzFrameReader(f *testing.F) {
	f.Add(streamOf([]byte("a"), []byte("bc")), []byte{0}, uint16(16))
	f.Add(streamOf(bytes.Repeat([]byte{1}, 300), nil), []byte{1, 7, 200}, uint16(400))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2}, []byte{}, uint16(100))
	f.Add(streamOf([]byte("abc"))[:5], []byte{2}, uint16(3))
	f.Fuzz(func(t *testing.T, stream, sizes []byte, maxFrame uint16) {
		checkSplit(t, stream, sizes, 16, int(maxFrame))
	})
}

func TestFrameReader_NextAllocatesNothing(t *testing.T) {
	frame := make([]byte, 256)
	stream := bytes.Repeat(streamOf(frame), 64)
	fr := newFrameReader(len(stream), 1<<16)
	r := bytes.NewReader(stream)
	allocs := testing.AllocsPerRun(100, func() {
		r.Reset(stream)
		fr.start, fr.end = 0, 0
		if _, err := fr.fill(r); err != nil {
			t.Fatal(err)
		}
		for n := 0; ; n++ {
			f, _ := fr.next()
			if f == nil {
				if n != 64 {
					t.Fatalf("%d frames", n)
				}
				break
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("fill+next allocate %v per run", allocs)
	}
}
