package replayer

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// scriptSource hands SendRange its chunks in order; a nil chunk that is
// not last is "at the tip".
type scriptSource struct {
	chunks  [][]byte
	last    int // index of the last chunk
	failure error
	asked   int
}

func (s *scriptSource) Next() ([]byte, bool, error) {
	i := s.asked
	s.asked++
	if i >= s.last {
		return s.chunks[s.last], true, s.failure
	}
	return s.chunks[i], false, nil
}

// sendAndRead runs SendRange into one end of a pipe and returns what the
// other end read and SendRange's error.
func sendAndRead(t *testing.T, src RangeSource, cfg RangeSendConfig) (string, error) {
	t.Helper()
	a, b := net.Pipe()
	defer b.Close()
	errc := make(chan error, 1)
	go func() {
		errc <- SendRange(a, src, cfg)
		a.Close()
	}()
	got, _ := io.ReadAll(b)
	return string(got), <-errc
}

func TestSendRange_WritesEveryChunkThenTheLastAndReturnsItsFailure(t *testing.T) {
	boom := errors.New("boom")
	var sent int
	src := &scriptSource{chunks: [][]byte{[]byte("ab"), []byte("cd"), []byte("E!")}, last: 2, failure: boom}
	got, err := sendAndRead(t, src, RangeSendConfig{WriteTimeout: time.Second, Sent: func(n int) { sent += n }})
	if got != "abcdE!" || !errors.Is(err, boom) || sent != 6 {
		t.Fatalf("read %q, err %v, sent %d; want abcdE!, boom, 6", got, err, sent)
	}
}

func TestSendRange_WaitsAtTheTipForAFollowingSource(t *testing.T) {
	src := &scriptSource{chunks: [][]byte{[]byte("a"), nil, nil, []byte("b"), []byte("end")}, last: 4}
	got, err := sendAndRead(t, src, RangeSendConfig{WriteTimeout: time.Second, TipPoll: time.Microsecond, TipPollMax: time.Millisecond})
	if got != "abend" || err != nil {
		t.Fatalf("read %q, err %v; want abend, nil", got, err)
	}
}

func TestSendRange_StopsWhenTheClientIsGone(t *testing.T) {
	gone := make(chan struct{})
	close(gone)
	src := &scriptSource{chunks: [][]byte{nil, []byte("never")}, last: 1}
	got, err := sendAndRead(t, src, RangeSendConfig{WriteTimeout: time.Second, TipPoll: time.Hour, TipPollMax: time.Hour, Gone: gone})
	if got != "" || err != nil {
		t.Fatalf("read %q, err %v; want nothing, nil", got, err)
	}
}

func TestSendRange_ASourceThatDoesNotFollowMustNotStall(t *testing.T) {
	src := &scriptSource{chunks: [][]byte{[]byte("a"), nil, []byte("end")}, last: 2}
	got, err := sendAndRead(t, src, RangeSendConfig{WriteTimeout: time.Second})
	if got != "a" || !errors.Is(err, ErrRangeStalled) {
		t.Fatalf("read %q, err %v; want a, ErrRangeStalled", got, err)
	}
}

func TestSendRange_AFailedWriteEndsTheRange(t *testing.T) {
	a, b := net.Pipe()
	b.Close()
	src := &scriptSource{chunks: [][]byte{[]byte("a"), []byte("end")}, last: 1}
	err := SendRange(a, src, RangeSendConfig{WriteTimeout: time.Second})
	if err == nil || src.asked != 1 {
		t.Fatalf("err %v after %d chunks; want a write error after 1", err, src.asked)
	}
}
