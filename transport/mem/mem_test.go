package mem

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/transporttest"
)

func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, clients int) (transport.Server, []transport.Client, func()) {
		n, err := NewNetwork(DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		srv := n.Server()
		cls := make([]transport.Client, clients)
		for i := range cls {
			cls[i] = n.Client()
		}
		return srv, cls, func() {
			srv.Close()
			for _, c := range cls {
				c.Close()
			}
		}
	})
}

func TestConfig_Validate(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{MinDelay: -1}, "MinDelay"},
		{Config{MinDelay: 2, MaxDelay: 1}, "MaxDelay"},
		{Config{QueueFrames: -1}, "QueueFrames"},
		{Config{MaxFrameBytes: 1 << 30}, "MaxFrameBytes"},
		{Config{Faults: fault.Config{Loss: 1}}, "Faults"},
	} {
		_, err := NewNetwork(tc.cfg)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewNetwork(%+v) = %v, want ErrConfig naming %s", tc.cfg, err, tc.want)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := NewNetwork(Config{}); err != nil {
		t.Fatalf("zero Config (all defaults): %v", err)
	}
}

// delivery is one frame as a receiver saw it.
type delivery struct {
	to, from transport.Peer
	at       int64
	id       byte
}

// recorder collects what every endpoint of a network receives.
type recorder struct {
	net  *Network
	got  []delivery
	to   transport.Peer
	hand transport.Handler
}

func newRecorder(n *Network) *recorder {
	r := &recorder{net: n}
	r.hand = r.handle
	return r
}

func (r *recorder) handle(frame []byte, from transport.Peer) {
	r.got = append(r.got, delivery{to: r.to, from: from, at: r.net.Now(), id: frame[0]})
}

// pollAll polls the server (as NoPeer) and each client once, with wait=0.
func (r *recorder) pollAll(t *testing.T, srv transport.Server, cls []transport.Client) int {
	t.Helper()
	total := 0
	r.to = transport.NoPeer
	n, err := srv.Poll(r.hand, 0)
	if err != nil {
		t.Fatal(err)
	}
	total += n
	for i, c := range cls {
		r.to = transport.Peer(i + 1)
		n, err := c.Poll(r.hand, 0)
		if err != nil {
			t.Fatal(err)
		}
		total += n
	}
	return total
}

func build(t *testing.T, cfg Config, clients int) (*Network, transport.Server, []transport.Client) {
	t.Helper()
	n, err := NewNetwork(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cls := make([]transport.Client, clients)
	for i := range cls {
		cls[i] = n.Client()
	}
	return n, n.Server(), cls
}

// simulate drives a network the way the simulator does: one goroutine,
// wait=0, the clock jumping to the next delivery. Frame i (id byte i) is
// published at virtual time i*step and every client sends one frame back
// for every frame it receives.
func simulate(t *testing.T, cfg Config, frames int, step int64) []delivery {
	t.Helper()
	n, srv, cls := build(t, cfg, 3)
	r := newRecorder(n)
	frame := make([]byte, 100)
	for i := 0; i < frames; i++ {
		n.SetNow(int64(i) * step)
		frame[0] = byte(i)
		if err := srv.Publish(frame); err != nil {
			t.Fatal(err)
		}
		before := len(r.got)
		r.pollAll(t, srv, cls)
		for _, d := range r.got[before:] {
			if d.to != transport.NoPeer {
				frame[0] = d.id
				if err := cls[d.to-1].Send(frame); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for {
		r.pollAll(t, srv, cls)
		at, ok := n.NextDelivery()
		if !ok {
			break
		}
		n.SetNow(at)
	}
	// Idle polls released any reordered frames; deliver them.
	for r.pollAll(t, srv, cls) > 0 {
	}
	if p := n.Pending(); p != 0 {
		t.Fatalf("%d frames still pending", p)
	}
	return r.got
}

func TestFaults_Loss(t *testing.T) {
	const frames = 4000
	n, srv, cls := build(t, Config{Faults: fault.Config{Loss: 0.1, Seed: 3}}, 2)
	r := newRecorder(n)
	frame := []byte{0}
	for i := 0; i < frames; i++ {
		if err := srv.Publish(frame); err != nil {
			t.Fatal(err)
		}
		if err := cls[0].Send(frame); err != nil {
			t.Fatal(err)
		}
	}
	r.pollAll(t, srv, cls)
	per := map[transport.Peer]int{}
	for _, d := range r.got {
		per[d.to]++
	}
	// 4000 frames per link at 10% loss: the count of survivors has a
	// standard deviation of 19, so 3400..3800 is over 10 sigma wide.
	for _, to := range []transport.Peer{transport.NoPeer, 1, 2} {
		if per[to] < 3400 || per[to] > 3800 {
			t.Errorf("endpoint %d received %d of %d frames at loss=0.1", to, per[to], frames)
		}
	}
	fc := n.FaultCounters()
	if got := uint64(len(r.got)) + fc.Dropped; got != 3*frames {
		t.Errorf("received %d + dropped %d != sent %d", len(r.got), fc.Dropped, 3*frames)
	}
	sc := srv.(transport.Stats).Counters()
	if sc.FramesSent != frames || sc.Dropped == 0 {
		t.Errorf("server counters %+v", sc)
	}
}

func TestFaults_SameSeedSameDeliveries(t *testing.T) {
	cfg := Config{
		Faults:   fault.Config{Loss: 0.05, Dup: 0.05, Reorder: 0.05, Seed: 11},
		MinDelay: 10 * time.Microsecond,
		MaxDelay: 500 * time.Microsecond,
	}
	a := simulate(t, cfg, 500, 20_000)
	b := simulate(t, cfg, 500, 20_000)
	if len(a) == 0 {
		t.Fatal("nothing delivered")
	}
	if len(a) != len(b) {
		t.Fatalf("run 1 delivered %d frames, run 2 %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("delivery %d differs: %+v vs %+v", i, a[i], b[i])
		}
	}
	cfg.Faults.Seed = 12
	c := simulate(t, cfg, 500, 20_000)
	same := len(a) == len(c)
	for i := 0; same && i < len(a); i++ {
		same = a[i] == c[i]
	}
	if same {
		t.Fatal("seeds 11 and 12 gave identical deliveries: the seed is not used")
	}
}

func TestFaults_DelayReordersByVirtualTime(t *testing.T) {
	const frames = 200
	// Frames published 1µs apart with delays spread over 0..100µs overtake
	// each other; delivery must follow deliverAt, then send order.
	got := simulate(t, Config{MaxDelay: 100 * time.Microsecond, Faults: fault.Config{Seed: 5}}, frames, 1000)
	var toClient1 []delivery
	for _, d := range got {
		if d.to == 1 {
			toClient1 = append(toClient1, d)
		}
	}
	if len(toClient1) != frames {
		t.Fatalf("client 1 got %d frames, want %d (no loss configured)", len(toClient1), frames)
	}
	reordered := 0
	for i := 1; i < len(toClient1); i++ {
		if toClient1[i].at < toClient1[i-1].at {
			t.Fatalf("delivery %d at %d before delivery %d at %d", i, toClient1[i].at, i-1, toClient1[i-1].at)
		}
		if toClient1[i].id < toClient1[i-1].id {
			reordered++
		}
	}
	if reordered == 0 {
		t.Fatal("random delays of up to 100 frame intervals reordered nothing")
	}
	for i, d := range toClient1 {
		// delay <= MaxDelay: a frame arrives within 100µs of being sent
		if sent := int64(d.id) * 1000; d.at < sent || d.at > sent+100_000 {
			t.Fatalf("delivery %d: frame %d sent at %d delivered at %d", i, d.id, sent, d.at)
		}
	}
}

func TestNetwork_FramesWaitForVirtualTime(t *testing.T) {
	n, srv, cls := build(t, Config{MinDelay: time.Millisecond, MaxDelay: time.Millisecond}, 1)
	r := newRecorder(n)
	n.SetNow(5)
	if err := srv.Publish([]byte{7}); err != nil {
		t.Fatal(err)
	}
	if got := r.pollAll(t, srv, cls); got != 0 {
		t.Fatalf("delivered %d frames before their time", got)
	}
	at, ok := n.NextDelivery()
	if !ok || at != 5+int64(time.Millisecond) {
		t.Fatalf("NextDelivery = %d, %v; want %d", at, ok, 5+int64(time.Millisecond))
	}
	if n.Pending() != 1 {
		t.Fatalf("Pending = %d, want 1", n.Pending())
	}
	n.SetNow(at - 1)
	if got := r.pollAll(t, srv, cls); got != 0 {
		t.Fatalf("delivered %d frames 1ns early", got)
	}
	n.SetNow(at)
	if got := r.pollAll(t, srv, cls); got != 1 || r.got[0].id != 7 {
		t.Fatalf("at deliverAt: delivered %d (%+v)", got, r.got)
	}
	if _, ok := n.NextDelivery(); ok || n.Pending() != 0 {
		t.Fatal("network not empty after delivery")
	}
}

func TestNetwork_PollWaitWokenBySetNow(t *testing.T) {
	n, srv, cls := build(t, Config{MinDelay: time.Second, MaxDelay: time.Second}, 1)
	if err := srv.Publish([]byte{1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan int)
	go func() {
		got, _ := cls[0].Poll(func([]byte, transport.Peer) {}, time.Minute)
		done <- got
	}()
	time.Sleep(10 * time.Millisecond)
	n.SetNow(int64(time.Second))
	if got := <-done; got != 1 {
		t.Fatalf("Poll returned %d frames, want 1", got)
	}
}

func TestPartition_DropsBothDirections(t *testing.T) {
	n, srv, cls := build(t, DefaultConfig(), 2)
	r := newRecorder(n)
	send := func(id byte) {
		t.Helper()
		if err := srv.Publish([]byte{id}); err != nil {
			t.Fatal(err)
		}
		if err := srv.SendTo(1, []byte{id}); err != nil {
			t.Fatal(err)
		}
		for _, c := range cls {
			if err := c.Send([]byte{id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	send(1) // in flight when the cut happens: lost too
	n.Partition(1, true)
	send(2)
	r.pollAll(t, srv, cls)
	n.Partition(1, false)
	send(3)
	r.pollAll(t, srv, cls)

	var lines []string
	for _, d := range r.got {
		lines = append(lines, string(rune('0'+d.from))+">"+string(rune('0'+d.to))+":"+string(rune('0'+d.id)))
	}
	// Client 2 is never cut; client 1 hears nothing and is heard by nobody
	// while cut, then both directions come back.
	want := "2>0:1 2>0:2 0>2:1 0>2:2 1>0:3 2>0:3 0>1:3 0>1:3 0>2:3"
	if got := strings.Join(lines, " "); got != want {
		t.Fatalf("deliveries (from>to:id)\n got %s\nwant %s", got, want)
	}
	if c := cls[0].(transport.Stats).Counters(); c.Dropped == 0 {
		t.Errorf("client 1 counted no drops: %+v", c)
	}
}

func TestQueueFull_DropsAndCounts(t *testing.T) {
	_, srv, cls := build(t, Config{QueueFrames: 4}, 1)
	for i := 0; i < 10; i++ {
		if err := srv.Publish([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
	}
	var ids []byte
	if _, err := cls[0].Poll(func(f []byte, _ transport.Peer) { ids = append(ids, f[0]) }, 0); err != nil {
		t.Fatal(err)
	}
	if string(ids) != "\x00\x01\x02\x03" {
		t.Fatalf("delivered %v, want the first 4", ids)
	}
	if c := cls[0].(transport.Stats).Counters(); c.Dropped != 6 || c.FramesReceived != 4 {
		t.Fatalf("client counters %+v, want 6 dropped, 4 received", c)
	}
}

func TestSendTo_UnknownPeer(t *testing.T) {
	_, srv, _ := build(t, DefaultConfig(), 1)
	for _, p := range []transport.Peer{transport.NoPeer, 2} {
		if err := srv.SendTo(p, []byte{1}); !errors.Is(err, ErrUnknownPeer) {
			t.Errorf("SendTo(%d) = %v, want ErrUnknownPeer", p, err)
		}
	}
}

func TestHandlerMaySend(t *testing.T) {
	_, srv, cls := build(t, DefaultConfig(), 1)
	if err := srv.Publish([]byte{1}); err != nil {
		t.Fatal(err)
	}
	c := cls[0]
	// A node answers from inside its handler; the network lock must not
	// be held during the call.
	if _, err := c.Poll(func(f []byte, _ transport.Peer) {
		if err := c.Send(f); err != nil {
			t.Error(err)
		}
	}, 0); err != nil {
		t.Fatal(err)
	}
	if n, err := srv.Poll(func([]byte, transport.Peer) {}, 0); n != 1 || err != nil {
		t.Fatalf("server Poll = %d, %v; want the echoed frame", n, err)
	}
}

func TestPublishPoll_AllocatesNothing(t *testing.T) {
	_, srv, cls := build(t, Config{Faults: fault.Config{Loss: 0.01, Dup: 0.01, Reorder: 0.01, Seed: 1}}, 3)
	frame := make([]byte, 1472)
	sum := 0
	h := func(f []byte, _ transport.Peer) { sum += len(f) }
	var ht transport.Handler = h
	round := func() {
		if err := srv.Publish(frame); err != nil {
			t.Fatal(err)
		}
		for _, c := range cls {
			if _, err := c.Poll(ht, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 0; i < 100; i++ { // warm the free list and the inbox heaps
		round()
	}
	if a := testing.AllocsPerRun(1000, round); a != 0 {
		t.Fatalf("Publish + Poll of 1472 bytes to 3 clients allocates %v per frame", a)
	}
	if sum == 0 {
		t.Fatal("nothing delivered")
	}
}

func BenchmarkPublishPoll(b *testing.B) {
	for _, clients := range []int{1, 3} {
		b.Run("clients="+string(rune('0'+clients)), func(b *testing.B) {
			n, err := NewNetwork(DefaultConfig())
			if err != nil {
				b.Fatal(err)
			}
			srv := n.Server()
			cls := make([]transport.Client, clients)
			for i := range cls {
				cls[i] = n.Client()
			}
			frame := make([]byte, 1472)
			var h transport.Handler = func([]byte, transport.Peer) {}
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for b.Loop() {
				srv.Publish(frame)
				for _, c := range cls {
					c.Poll(h, 0)
				}
			}
		})
	}
}
