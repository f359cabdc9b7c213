package transporttest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
)

// Factory returns a server and clients connected to it, ready to carry
// frames both ways, with no faults. cleanup closes whatever is still open;
// it must tolerate endpoints the suite has already closed.
type Factory func(t *testing.T, clients int) (srv transport.Server, cls []transport.Client, cleanup func())

// MaxFrameSizer is the optional ability of an endpoint to say the largest
// frame it carries. Endpoints without it are assumed to carry 1472 bytes
// (one UDP datagram on an Ethernet MTU).
type MaxFrameSizer interface {
	MaxFrameBytes() int
}

// DefaultMaxFrameBytes is assumed for endpoints that do not implement
// MaxFrameSizer.
const DefaultMaxFrameBytes = 1472

const (
	numClients   = 3
	streamFrames = 2000
	burstFrames  = 64
	// liveness bounds a wait for frames that must arrive; reaching it is a
	// failure (lost or stuck frames), never a measure of speed.
	liveness = 10 * time.Second
	// quiet is how long a receiver listens to show that nothing more comes.
	quiet = 50 * time.Millisecond
)

// Run runs the conformance suite as subtests of t.
func Run(t *testing.T, f Factory) {
	t.Run("PublishReachesEveryClientOnceInOrder", func(t *testing.T) { testPublish(t, f, streamFrames, burstFrames, 0, false) })
	// Slow handlers while the publisher runs ahead: a frame buffer recycled
	// before its handler returns gets overwritten by a later frame.
	t.Run("HandlerFrameStableDuringCall", func(t *testing.T) { testPublish(t, f, 512, 16, 32, true) })
	t.Run("SendReachesServerAndSendToOnlyThatClient", func(t *testing.T) { testSendTo(t, f) })
	t.Run("MaxFrameArrivesIntact", func(t *testing.T) { testMaxFrame(t, f) })
	t.Run("IdlePollReturnsZero", func(t *testing.T) { testIdlePoll(t, f) })
	t.Run("CloseThenErrClosed", func(t *testing.T) { testClose(t, f) })
	t.Run("CloseUnblocksPoll", func(t *testing.T) { testCloseUnblocks(t, f) })
	t.Run("FlushAnytime", func(t *testing.T) { testFlush(t, f) })
	t.Run("WakeEndsABlockedPoll", func(t *testing.T) { testWake(t, f) })
}

// Frames carry their index and a pattern derived from it, so a receiver can
// check every byte without keeping the sent frames.
//
//	0 index u32, 4 length u32, 8.. pattern

const frameHeader = 8

// frameSize spreads stream frames over 100..1400 bytes.
func frameSize(i int) int { return 100 + (i*7919)%1301 }

func fill(buf []byte, index int) []byte {
	binary.LittleEndian.PutUint32(buf, uint32(index))
	binary.LittleEndian.PutUint32(buf[4:], uint32(len(buf)))
	for j := frameHeader; j < len(buf); j++ {
		buf[j] = patternByte(index, j)
	}
	return buf
}

func patternByte(index, j int) byte { return byte(index*131 + j*7 + j>>8) }

// check returns the frame's index, or an error saying what is wrong with it.
func check(frame []byte) (int, error) {
	if len(frame) < frameHeader {
		return -1, fmt.Errorf("frame of %d bytes, want >= %d", len(frame), frameHeader)
	}
	index := int(binary.LittleEndian.Uint32(frame))
	if n := int(binary.LittleEndian.Uint32(frame[4:])); n != len(frame) {
		return index, fmt.Errorf("frame %d: %d bytes, sent %d", index, len(frame), n)
	}
	for j := frameHeader; j < len(frame); j++ {
		if frame[j] != patternByte(index, j) {
			return index, fmt.Errorf("frame %d: byte %d is %#x, sent %#x", index, j, frame[j], patternByte(index, j))
		}
	}
	return index, nil
}

func maxFrame(e any) (int, bool) {
	if m, ok := e.(MaxFrameSizer); ok {
		return m.MaxFrameBytes(), true
	}
	return DefaultMaxFrameBytes, false
}

func open(t *testing.T, f Factory, clients int) (transport.Server, []transport.Client) {
	t.Helper()
	srv, cls, cleanup := f(t, clients)
	if len(cls) != clients {
		cleanup()
		t.Fatalf("factory returned %d clients, asked for %d", len(cls), clients)
	}
	t.Cleanup(cleanup)
	return srv, cls
}

func ignore(frame []byte, from transport.Peer) {}

// receiver drains one client in its own goroutine and checks the stream.
type receiver struct {
	cl    transport.Client
	slow  bool // re-check every frame after yielding, to catch reuse
	want  int
	got   atomic.Int64
	stop  atomic.Bool
	first error // first problem; read after done closes
	done  chan struct{}
}

func (r *receiver) handle(frame []byte, from transport.Peer) {
	if r.first != nil {
		return
	}
	next := int(r.got.Load())
	index, err := check(frame)
	if err == nil && index != next {
		err = fmt.Errorf("got frame %d, want %d (each frame once, in publish order)", index, next)
	}
	if err == nil && r.slow {
		// Give a transport that reuses the buffer too early (a reader
		// goroutine, a ring slot) the chance to overwrite it mid-call.
		runtime.Gosched()
		if next%8 == 0 {
			time.Sleep(200 * time.Microsecond)
		}
		if _, err2 := check(frame); err2 != nil {
			err = fmt.Errorf("frame changed while its handler ran: %w", err2)
		}
	}
	if err != nil {
		r.first = err
		return
	}
	r.got.Add(1)
}

func (r *receiver) run() {
	defer close(r.done)
	h := r.handle
	for int(r.got.Load()) < r.want && r.first == nil && !r.stop.Load() {
		if _, err := r.cl.Poll(h, 10*time.Millisecond); err != nil {
			r.first = fmt.Errorf("poll: %w", err)
			return
		}
	}
}

// testPublish publishes total frames in bursts; before each burst it waits
// until every client is at most lag frames behind.
func testPublish(t *testing.T, f Factory, total, burst, lag int, slow bool) {
	srv, cls := open(t, f, numClients)
	rs := make([]*receiver, len(cls))
	for i, cl := range cls {
		rs[i] = &receiver{cl: cl, slow: slow, want: total, done: make(chan struct{})}
		go rs[i].run()
	}
	stopAll := func() {
		for _, r := range rs {
			r.stop.Store(true)
			<-r.done
		}
	}
	// One buffer for every frame, overwritten right after Publish: the
	// transport must have copied it.
	buf := make([]byte, 1400)
	deadline := time.Now().Add(liveness)
	for sent := 0; sent < total; {
		for end := min(sent+burst, total); sent < end; sent++ {
			if err := srv.Publish(fill(buf[:frameSize(sent)], sent)); err != nil {
				stopAll()
				t.Fatalf("Publish frame %d: %v", sent, err)
			}
			clear(buf)
		}
		if err := srv.Flush(); err != nil {
			stopAll()
			t.Fatalf("Flush: %v", err)
		}
		// Let the receivers catch up before the next burst; keep polling
		// the server so a transport that works in Poll makes progress.
		behind := sent - lag
		if sent == total {
			behind = total
		}
		for !caughtUp(rs, behind) {
			if _, err := srv.Poll(ignore, time.Millisecond); err != nil {
				stopAll()
				t.Fatalf("server Poll: %v", err)
			}
			if time.Now().After(deadline) {
				stopAll()
				t.Fatalf("after %d frames published, clients have %v (lost or stuck frames)", sent, counts(rs))
			}
		}
	}
	for i, r := range rs {
		<-r.done
		if r.first != nil {
			t.Errorf("client %d: %v", i, r.first)
		}
	}
	if t.Failed() {
		return
	}
	for i, cl := range cls {
		if n, err := cl.Poll(func(frame []byte, _ transport.Peer) {
			index, _ := check(frame)
			t.Errorf("client %d: extra frame %d after the whole stream", i, index)
		}, quiet); err != nil || n != 0 {
			t.Errorf("client %d: Poll after the stream = %d, %v; want 0, nil", i, n, err)
		}
	}
}

func caughtUp(rs []*receiver, sent int) bool {
	for _, r := range rs {
		select {
		case <-r.done:
			if r.first != nil {
				return true // the failure is reported by the caller
			}
		default:
		}
		if int(r.got.Load()) < sent {
			return false
		}
	}
	return true
}

func counts(rs []*receiver) []int64 {
	c := make([]int64, len(rs))
	for i, r := range rs {
		c[i] = r.got.Load()
	}
	return c
}

// collect polls until want frames arrived, handing each to h. The first
// error h returns fails the test once Poll has returned (never from inside
// a handler, so a transport is not unwound mid-call).
func collect(t *testing.T, who string, poll func(transport.Handler, time.Duration) (int, error), want int, h func(frame []byte, from transport.Peer) error) {
	t.Helper()
	got := 0
	var first error
	count := func(frame []byte, from transport.Peer) {
		got++
		if err := h(frame, from); err != nil && first == nil {
			first = err
		}
	}
	deadline := time.Now().Add(liveness)
	for got < want && first == nil {
		if _, err := poll(count, 10*time.Millisecond); err != nil {
			t.Fatalf("%s: Poll: %v", who, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d frames arrived (lost or stuck)", who, got, want)
		}
	}
	if first != nil {
		t.Fatalf("%s: %v", who, first)
	}
}

func accept([]byte, transport.Peer) error { return nil }

// expectQuiet polls for a while and fails on any frame.
func expectQuiet(t *testing.T, who string, poll func(transport.Handler, time.Duration) (int, error)) {
	t.Helper()
	n, err := poll(func(frame []byte, from transport.Peer) {
		index, _ := check(frame)
		t.Errorf("%s: unexpected frame %d from peer %d", who, index, from)
	}, quiet)
	if err != nil || n != 0 {
		t.Errorf("%s: Poll = %d, %v; want 0, nil", who, n, err)
	}
}

func testSendTo(t *testing.T, f Factory) {
	srv, cls := open(t, f, numClients)
	for k, cl := range cls {
		if err := cl.Send(fill(make([]byte, 64+k), k)); err != nil {
			t.Fatalf("client %d Send: %v", k, err)
		}
		if err := cl.Flush(); err != nil {
			t.Fatalf("client %d Flush: %v", k, err)
		}
	}
	peers := make([]transport.Peer, len(cls))
	seen := make([]bool, len(cls))
	collect(t, "server", srv.Poll, len(cls), func(frame []byte, from transport.Peer) error {
		k, err := check(frame)
		switch {
		case err != nil:
			return err
		case k < 0 || k >= len(cls) || seen[k]:
			return fmt.Errorf("unexpected frame %d", k)
		case from == transport.NoPeer:
			return fmt.Errorf("frame from client %d has NoPeer; SendTo could not answer it", k)
		}
		seen[k] = true
		peers[k] = from
		return nil
	})
	for a := range peers {
		for b := a + 1; b < len(peers); b++ {
			if peers[a] == peers[b] {
				t.Fatalf("clients %d and %d share Peer %d", a, b, peers[a])
			}
		}
	}
	// Answer the first client alone: nobody else may see it.
	reply := func(k int) {
		t.Helper()
		if err := srv.SendTo(peers[k], fill(make([]byte, 80+k), 100+k)); err != nil {
			t.Fatalf("SendTo client %d: %v", k, err)
		}
		if err := srv.Flush(); err != nil {
			t.Fatalf("Flush: %v", err)
		}
	}
	expectOnly := func(k int) {
		t.Helper()
		collect(t, fmt.Sprintf("client %d", k), cls[k].Poll, 1, func(frame []byte, _ transport.Peer) error {
			if index, err := check(frame); err != nil || index != 100+k {
				return fmt.Errorf("got frame %d (%v), want its reply %d", index, err, 100+k)
			}
			return nil
		})
	}
	reply(0)
	expectOnly(0)
	for k := 1; k < len(cls); k++ {
		expectQuiet(t, fmt.Sprintf("client %d (reply went to client 0)", k), cls[k].Poll)
	}
	for k := 1; k < len(cls); k++ {
		reply(k)
	}
	for k := 1; k < len(cls); k++ {
		expectOnly(k)
	}
	for k := range cls {
		expectQuiet(t, fmt.Sprintf("client %d", k), cls[k].Poll)
	}
}

func testMaxFrame(t *testing.T, f Factory) {
	srv, cls := open(t, f, 2)
	size, advertised := maxFrame(srv)
	if err := srv.Publish(fill(make([]byte, size), 1)); err != nil {
		t.Fatalf("Publish %d bytes (the maximum): %v", size, err)
	}
	if err := srv.Flush(); err != nil {
		t.Fatal(err)
	}
	for k, cl := range cls {
		collect(t, fmt.Sprintf("client %d", k), cl.Poll, 1, func(frame []byte, _ transport.Peer) error {
			if index, err := check(frame); err != nil || index != 1 || len(frame) != size {
				return fmt.Errorf("frame %d of %d bytes (%v), want frame 1 of %d bytes", index, len(frame), err, size)
			}
			return nil
		})
	}
	if advertised {
		if err := srv.Publish(make([]byte, size+1)); !errors.Is(err, transport.ErrFrameTooLarge) {
			t.Errorf("Publish %d bytes (max %d) = %v, want ErrFrameTooLarge", size+1, size, err)
		}
	}

	csize, cadvertised := maxFrame(cls[0])
	if err := cls[0].Send(fill(make([]byte, csize), 2)); err != nil {
		t.Fatalf("Send %d bytes (the maximum): %v", csize, err)
	}
	if err := cls[0].Flush(); err != nil {
		t.Fatal(err)
	}
	collect(t, "server", srv.Poll, 1, func(frame []byte, _ transport.Peer) error {
		if index, err := check(frame); err != nil || index != 2 || len(frame) != csize {
			return fmt.Errorf("frame %d of %d bytes (%v), want frame 2 of %d bytes", index, len(frame), err, csize)
		}
		return nil
	})
	if cadvertised {
		if err := cls[0].Send(make([]byte, csize+1)); !errors.Is(err, transport.ErrFrameTooLarge) {
			t.Errorf("Send %d bytes (max %d) = %v, want ErrFrameTooLarge", csize+1, csize, err)
		}
	}
}

func testIdlePoll(t *testing.T, f Factory) {
	srv, cls := open(t, f, 2)
	polls := []struct {
		who  string
		poll func(transport.Handler, time.Duration) (int, error)
	}{{"server", srv.Poll}, {"client 0", cls[0].Poll}, {"client 1", cls[1].Poll}}
	for _, p := range polls {
		for _, wait := range []time.Duration{0, 20 * time.Millisecond} {
			n, err := p.poll(func([]byte, transport.Peer) { t.Errorf("%s: frame on an idle transport", p.who) }, wait)
			if n != 0 || err != nil {
				t.Errorf("%s: idle Poll(wait=%v) = %d, %v; want 0, nil", p.who, wait, n, err)
			}
		}
	}
}

func testClose(t *testing.T, f Factory) {
	srv, cls := open(t, f, 2)
	frame := fill(make([]byte, 64), 0)
	// Find a real Peer for SendTo so that ErrClosed, not an unknown-peer
	// error, is the only right answer.
	if err := cls[0].Send(frame); err != nil {
		t.Fatal(err)
	}
	if err := cls[0].Flush(); err != nil {
		t.Fatal(err)
	}
	var peer transport.Peer
	collect(t, "server", srv.Poll, 1, func(_ []byte, from transport.Peer) error { peer = from; return nil })

	if err := cls[1].Close(); err != nil {
		t.Fatalf("client Close: %v", err)
	}
	wantClosed := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, transport.ErrClosed) {
			t.Errorf("%s after Close = %v, want ErrClosed", what, err)
		}
	}
	wantClosed("client Send", cls[1].Send(frame))
	wantClosed("client Flush", cls[1].Flush())
	_, err := cls[1].Poll(ignore, 0)
	wantClosed("client Poll(0)", err)
	_, err = cls[1].Poll(ignore, 10*time.Millisecond)
	wantClosed("client Poll(10ms)", err)
	if err := cls[1].Close(); err != nil && !errors.Is(err, transport.ErrClosed) {
		t.Errorf("second client Close = %v, want nil or ErrClosed", err)
	}

	// The server still serves the clients that are open.
	if err := srv.Publish(frame); err != nil {
		t.Fatalf("Publish with one client closed: %v", err)
	}
	if err := srv.Flush(); err != nil {
		t.Fatalf("Flush with one client closed: %v", err)
	}
	collect(t, "client 0", cls[0].Poll, 1, accept)

	if err := srv.Close(); err != nil {
		t.Fatalf("server Close: %v", err)
	}
	wantClosed("Publish", srv.Publish(frame))
	wantClosed("SendTo", srv.SendTo(peer, frame))
	wantClosed("server Flush", srv.Flush())
	_, err = srv.Poll(ignore, 0)
	wantClosed("server Poll(0)", err)
	_, err = srv.Poll(ignore, 10*time.Millisecond)
	wantClosed("server Poll(10ms)", err)
	if err := srv.Close(); err != nil && !errors.Is(err, transport.ErrClosed) {
		t.Errorf("second server Close = %v, want nil or ErrClosed", err)
	}
}

func testCloseUnblocks(t *testing.T, f Factory) {
	srv, cls := open(t, f, 1)
	endpoints := []struct {
		who   string
		poll  func(transport.Handler, time.Duration) (int, error)
		close func() error
	}{{"client", cls[0].Poll, cls[0].Close}, {"server", srv.Poll, srv.Close}}
	for _, e := range endpoints {
		var wg sync.WaitGroup
		var pollErr error
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, pollErr = e.poll(ignore, time.Minute)
		}()
		time.Sleep(20 * time.Millisecond) // most likely blocked in Poll by now
		if err := e.close(); err != nil {
			t.Fatalf("%s Close: %v", e.who, err)
		}
		returned := make(chan struct{})
		go func() { wg.Wait(); close(returned) }()
		select {
		case <-returned:
		case <-time.After(liveness):
			t.Fatalf("%s: Poll(wait=1m) still blocked %v after Close", e.who, liveness)
		}
		if !errors.Is(pollErr, transport.ErrClosed) {
			t.Errorf("%s: Poll interrupted by Close = %v, want ErrClosed", e.who, pollErr)
		}
	}
}

// testWake: a client or a server that is a transport.Waker returns from a long Poll
// soon after Wake, with no error, and stays usable; Wakes with nobody
// waiting make the next Poll return early once (they coalesce), never
// more, and are never lost.
//
// The bounds are generous on purpose: a Poll(10s) that returns within
// wakeBound of a Wake was woken (it did not time out), and one that waits
// at least most of its time was not. They check correctness, not speed.
func testWake(t *testing.T, f Factory) {
	srv, cls := open(t, f, 1)
	for _, e := range []struct {
		who string
		p   poller
	}{{"client", cls[0]}, {"server", srv}} {
		t.Run(e.who, func(t *testing.T) {
			w, ok := e.p.(transport.Waker)
			if !ok {
				t.Skipf("%s is not a transport.Waker", e.who)
			}
			wakeCases(t, e.p, w)
		})
	}
}

// poller is what a client and a server share: Poll.
type poller interface {
	Poll(h transport.Handler, wait time.Duration) (int, error)
}

func wakeCases(t *testing.T, p poller, w transport.Waker) {
	const long, wakeBound = 10 * time.Second, 2 * time.Second
	for round := 0; round < 3; round++ {
		type result struct {
			err     error
			elapsed time.Duration
		}
		done := make(chan result, 1)
		go func() {
			start := time.Now()
			_, err := p.Poll(ignore, long)
			done <- result{err, time.Since(start)}
		}()
		time.Sleep(20 * time.Millisecond) // most likely blocked in Poll by now
		w.Wake()
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatalf("round %d: Poll after Wake = %v, want nil", round, r.err)
			}
			if r.elapsed > wakeBound {
				t.Fatalf("round %d: Poll(%v) returned after %v: it timed out, the Wake was lost", round, long, r.elapsed)
			}
		case <-time.After(liveness + long):
			t.Fatalf("round %d: Poll(%v) still blocked after Wake", round, long)
		}
	}
	// Wakes with nobody waiting make the next Poll return early, once.
	for _, wakes := range []int{1, 100} {
		for range wakes {
			w.Wake()
		}
		start := time.Now()
		if _, err := p.Poll(ignore, long); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > wakeBound {
			t.Fatalf("%d Wake(s), then Poll(%v) returned after %v: the wake was lost", wakes, long, d)
		}
		const short = 30 * time.Millisecond
		start = time.Now()
		if _, err := p.Poll(ignore, short); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < short*3/4 {
			t.Fatalf("%d Wake(s) woke two Polls: the second Poll(%v) returned after %v", wakes, short, d)
		}
	}
}

func testFlush(t *testing.T, f Factory) {
	srv, cls := open(t, f, 2)
	if err := srv.Flush(); err != nil {
		t.Fatalf("Flush before anything was sent: %v", err)
	}
	for k, cl := range cls {
		if err := cl.Flush(); err != nil {
			t.Fatalf("client %d Flush before anything was sent: %v", k, err)
		}
	}
	buf := make([]byte, 600)
	publish := func(i int) {
		t.Helper()
		if err := srv.Publish(fill(buf[:frameSize(i)%512+frameHeader], i)); err != nil {
			t.Fatalf("Publish %d: %v", i, err)
		}
	}
	publish(0)
	if err := srv.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Flush(); err != nil {
		t.Fatalf("second Flush: %v", err)
	}
	publish(1)
	publish(2)
	// No Flush: Poll flushes queued output before it waits.
	if _, err := srv.Poll(ignore, 0); err != nil {
		t.Fatal(err)
	}
	for k, cl := range cls {
		next := 0
		collect(t, fmt.Sprintf("client %d", k), cl.Poll, 3, func(frame []byte, _ transport.Peer) error {
			if index, err := check(frame); err != nil || index != next {
				return fmt.Errorf("frame %d (%v), want %d", index, err, next)
			}
			next++
			return nil
		})
	}
	for k, cl := range cls {
		if err := cl.Send(fill(buf[:40], 10+k)); err != nil {
			t.Fatal(err)
		}
		if err := cl.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := cl.Flush(); err != nil {
			t.Fatalf("client %d second Flush: %v", k, err)
		}
	}
	got := make(map[int]bool)
	collect(t, "server", srv.Poll, len(cls), func(frame []byte, _ transport.Peer) error {
		index, err := check(frame)
		if err != nil || index < 10 || index >= 10+len(cls) || got[index] {
			return fmt.Errorf("frame %d (%v), want one from each client", index, err)
		}
		got[index] = true
		return nil
	})
}

// EchoFactory starts a repair source (as a replayer would be) that sends
// every frame it receives back to its sender, stopped at t's cleanup, and
// returns the address a transport.Sourcer client gives AddSource.
type EchoFactory func(t *testing.T) (addr string)

// RunSourcer runs the conformance tests of transport.Sourcer clients as
// subtests of t: f as for Run, echo to start repair sources.
func RunSourcer(t *testing.T, f Factory, echo EchoFactory) {
	t.Run("SourceAnswersWithItsPeer", func(t *testing.T) { testSourcer(t, f, echo) })
}

// testSourcer: frames sent to a source added with AddSource reach it
// alone (not the sequencer), and its answers reach the client's handler
// with that source's Peer, distinct from the sequencer's and from other
// sources'.
func testSourcer(t *testing.T, f Factory, echo EchoFactory) {
	srv, cls := open(t, f, 1)
	src, ok := cls[0].(transport.Sourcer)
	if !ok {
		t.Skip("client is not a transport.Sourcer")
	}
	addrs := []string{echo(t), echo(t)}
	peers := make([]transport.Peer, len(addrs))
	for i, a := range addrs {
		p, err := src.AddSource(a)
		if err != nil {
			t.Fatalf("AddSource(%s): %v", a, err)
		}
		if p == transport.NoPeer {
			t.Fatalf("AddSource(%s) = NoPeer", a)
		}
		if again, err := src.AddSource(a); err != nil || again != p {
			t.Fatalf("AddSource(%s) again = %d, %v; want %d, nil", a, again, err, p)
		}
		peers[i] = p
	}
	if peers[0] == peers[1] {
		t.Fatalf("two sources share Peer %d", peers[0])
	}
	if err := src.SendTo(peers[1]+100, fill(make([]byte, 64), 9)); err == nil {
		t.Errorf("SendTo(a Peer AddSource never returned) = nil, want an error")
	}
	// Ask each source until it answers: a source that connects may not
	// be connected yet, and frames sent before are dropped.
	got := make([]bool, len(peers))
	var first error
	h := func(frame []byte, from transport.Peer) {
		index, err := check(frame)
		switch {
		case err != nil:
		case index < 0 || index >= len(peers):
			err = fmt.Errorf("unexpected frame %d from Peer %d", index, from)
		case from != peers[index]:
			err = fmt.Errorf("source %d's answer came from Peer %d, want its Peer %d", index, from, peers[index])
		}
		if err != nil && first == nil {
			first = err
		}
		if err == nil {
			got[index] = true
		}
	}
	deadline := time.Now().Add(liveness)
	for !got[0] || !got[1] {
		if time.Now().After(deadline) {
			t.Fatalf("answers from sources: %v after %v", got, liveness)
		}
		for i, p := range peers {
			if !got[i] {
				if err := src.SendTo(p, fill(make([]byte, 64+i), i)); err != nil {
					t.Fatalf("SendTo(source %d): %v", i, err)
				}
			}
		}
		if err := cls[0].Flush(); err != nil {
			t.Fatal(err)
		}
		for end := time.Now().Add(20 * time.Millisecond); time.Now().Before(end) && (!got[0] || !got[1]); {
			if _, err := cls[0].Poll(h, 5*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		if first != nil {
			t.Fatal(first)
		}
	}
	expectQuiet(t, "server (frames went to the sources)", srv.Poll)
}
