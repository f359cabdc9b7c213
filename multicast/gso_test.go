package multicast

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seqd/seqd/transport"
)

// sized records the index and length of every intact frame it is handed.
type sized struct {
	got  []uint64
	lens []int
	bad  error
}

func (c *sized) handle(frame []byte, _ transport.Peer) {
	if len(frame) < 8 {
		c.bad = fmt.Errorf("frame of %d bytes after %d frames", len(frame), len(c.got))
		return
	}
	i := binary.LittleEndian.Uint64(frame)
	for j := 8; j < len(frame); j++ {
		if frame[j] != byte(i)+byte(j) {
			c.bad = fmt.Errorf("frame %d (%d B) corrupt at byte %d", i, len(frame), j)
			return
		}
	}
	c.got = append(c.got, i)
	c.lens = append(c.lens, len(frame))
}

// publishSizes publishes one indexed frame per size, flushing when done,
// and checks that every client receives each as its own frame, intact, in
// order, with its size.
func publishSizes(t *testing.T, srv *Server, cls []*Client, sizes []int) {
	t.Helper()
	buf := make([]byte, maxDatagramBytes)
	for i, n := range sizes {
		if err := srv.Publish(indexed(buf[:n], uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	receiveSizes(t, srv, cls, sizes)
}

// receiveSizes flushes srv and checks that every client received frames
// 0, 1, ... of the given sizes, made by indexed, in order.
func receiveSizes(t *testing.T, srv *Server, cls []*Client, sizes []int) {
	t.Helper()
	if err := srv.Flush(); err != nil {
		t.Fatal(err)
	}
	for k, cl := range cls {
		c := &sized{}
		for tries := 0; len(c.got) < len(sizes) && c.bad == nil && tries < 500; tries++ {
			if _, err := cl.Poll(c.handle, 0); err != nil {
				t.Fatal(err)
			}
			if len(c.got) < len(sizes) {
				if _, err := cl.Poll(c.handle, 20e6); err != nil {
					t.Fatal(err)
				}
			}
		}
		if c.bad != nil {
			t.Fatalf("client %d: %v", k, c.bad)
		}
		if len(c.got) != len(sizes) {
			t.Fatalf("client %d: %d frames, want %d", k, len(c.got), len(sizes))
		}
		for i := range sizes {
			if c.got[i] != uint64(i) || c.lens[i] != sizes[i] {
				t.Fatalf("client %d: frame %d is #%d of %d B, want #%d of %d B", k, i, c.got[i], c.lens[i], i, sizes[i])
			}
		}
	}
}

// A burst of MTU-size frames and a short one goes out as GSO messages, is
// coalesced by GRO, and still reaches every client as separate frames.
func TestGSO_BurstOfEqualFrames(t *testing.T) {
	cfg := testConfig(t)
	srv, cls := session(t, cfg, 2)
	sizes := make([]int, 201)
	for i := range sizes {
		sizes[i] = 1444
	}
	sizes[200] = 100
	publishSizes(t, srv, cls, sizes)
	if srv.out.gsoMessages == 0 {
		t.Errorf("no GSO message sent (%s)", srv.SocketInfo())
	}
	for k, cl := range cls {
		if cl.rx[0].groBuffers == 0 {
			t.Errorf("client %d: no GRO buffer received (%s)", k, cl.SocketInfo())
		}
		if c := cl.Counters(); c.FramesReceived != 201 || c.BytesReceived != 200*1444+100 || c.Dropped != 0 {
			t.Errorf("client %d counters %+v", k, c)
		}
	}
	if c := srv.Counters(); c.FramesSent != 201 || c.BytesSent != 200*1444+100 {
		t.Errorf("server counters %+v", c)
	}
	if info := srv.SocketInfo(); !strings.Contains(info, "gso on, gro on") {
		t.Errorf("SocketInfo() = %q, want gso on, gro on", info)
	}
}

// Runs of random lengths and sizes, with short tails, runs longer than 64
// segments and runs over 65000 bytes, cross every grouping boundary; with
// GSO and GRO on and off the clients see the same frames.
func TestGSO_MixedSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	pick := []int{8, 9, 100, 1000, 1444, 1472, 9000, 30000, 65507}
	var sizes []int
	for len(sizes) < 3000 {
		n, run := pick[rng.IntN(len(pick))], 1+rng.IntN(100)
		for range run {
			sizes = append(sizes, n)
		}
		if rng.IntN(2) == 0 {
			sizes = append(sizes, 8+rng.IntN(n)) // may be longer: breaks the run
		}
	}
	for _, offload := range []bool{true, false} {
		t.Run(fmt.Sprintf("gso,gro=%v", offload), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.GSO, cfg.GRO = offload, offload
			cfg.BatchSize = 256 // queues hold more than 64 frames: the segment limit is reached
			srv, cls := session(t, cfg, 2)
			for sent := 0; sent < len(sizes); sent += 500 {
				publishSizes(t, srv, cls, sizes[sent:min(sent+500, len(sizes))])
			}
			if offload && srv.out.gsoMessages == 0 {
				t.Errorf("no GSO message sent")
			}
			if !offload && (srv.out.gsoMessages != 0 || cls[0].rx[0].groBuffers != 0) {
				t.Errorf("offload off, yet %d GSO messages, %d GRO buffers", srv.out.gsoMessages, cls[0].rx[0].groBuffers)
			}
		})
	}
}

// build groups runs by the kernel's rule and the limits, and sends
// unicast replies one per datagram.
func TestSendQueue_BuildGroups(t *testing.T) {
	cfg := testConfig(t)
	cfg.BatchSize = 256
	srv, _ := session(t, cfg, 0)
	q := srv.out
	group, other := srv.stream, &net.UDPAddr{IP: net.IPv4(239, 1, 2, 3), Port: 9}
	uni := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}
	type frame struct {
		n  int
		to *net.UDPAddr
	}
	run := func(n, size int, to *net.UDPAddr) []frame {
		f := make([]frame, n)
		for i := range f {
			f[i] = frame{size, to}
		}
		return f
	}
	var in []frame
	in = append(in, run(3, 1000, group)...)           // 3
	in = append(in, frame{500, group})                // ... +short tail: 4
	in = append(in, run(2, 1000, group)...)           // a new run: 2
	in = append(in, frame{1200, group})               // longer: new message, 1
	in = append(in, run(2, 1000, other)...)           // other group: 2
	in = append(in, run(2, 1000, uni)...)             // unicast: 1, 1
	in = append(in, run(70, 100, group)...)           // 64, 6
	in = append(in, run(50, 1444, group)...)          // 65000/1444 = 45, 5
	in = append(in, frame{0, group}, frame{0, group}) // empty: 1, 1
	want := []int{4, 2, 1, 2, 1, 1, 64, 6, 45, 5, 1, 1}
	q.gso = true
	defer func() { q.n, q.used = 0, 0 }()
	for _, f := range in {
		q.bufs[q.n], q.lens[q.n], q.dests[q.n] = q.arena[q.used:q.used+f.n], f.n, f.to
		q.used += f.n
		q.n++
	}
	m := q.build(0)
	if got := q.msgFrames[:m]; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("frames per message %v, want %v", got, want)
	}
	for i := range m {
		h := &q.msgs[i].Hdr
		if gso := h.Controllen != 0; gso != (q.msgFrames[i] > 1) {
			t.Errorf("message %d of %d frames: control length %d", i, q.msgFrames[i], h.Controllen)
		}
		if q.iovs[i].Len > maxGSOBytes && q.msgFrames[i] > 1 {
			t.Errorf("message %d is %d bytes", i, q.iovs[i].Len)
		}
	}
	q.gso = false
	if m := q.build(0); m != len(in) {
		t.Errorf("without GSO: %d messages for %d frames", m, len(in))
	}
}

// When the kernel refuses a GSO message (here: a socket without UDP
// checksums, which GSO needs), the queue turns GSO off and resends the
// frames one per datagram; none is lost, and SocketInfo says why.
func TestGSO_FallbackLosesNothing(t *testing.T) {
	cfg := testConfig(t)
	srv, cls := session(t, cfg, 1)
	if err := unix.SetsockoptInt(srv.sender.fd, unix.SOL_SOCKET, unix.SO_NO_CHECK, 1); err != nil {
		t.Skipf("SO_NO_CHECK: %v", err)
	}
	sizes := make([]int, 150)
	for i := range sizes {
		sizes[i] = 1444
	}
	publishSizes(t, srv, cls, sizes)
	publishSizes(t, srv, cls, sizes[:10])
	if n := srv.out.gsoFallbacks.Load(); n != 1 {
		t.Errorf("%d fallbacks, want 1", n)
	}
	if srv.out.gsoMessages != 0 {
		t.Errorf("%d GSO messages went out on a socket that refuses them", srv.out.gsoMessages)
	}
	if info := srv.SocketInfo(); !strings.Contains(info, "gso off (kernel refused: invalid argument; 1 messages resent without it)") {
		t.Errorf("SocketInfo() = %q", info)
	}
	if c := srv.Counters(); c.FramesSent != 160 || c.Dropped != 0 {
		t.Errorf("server counters %+v", c)
	}
}

func TestSocketInfo_OffloadOff(t *testing.T) {
	cfg := testConfig(t)
	cfg.GSO, cfg.GRO = false, false
	srv, cls := session(t, cfg, 1)
	for _, info := range []string{srv.SocketInfo(), cls[0].SocketInfo()} {
		if !strings.Contains(info, "gso off, gro off") {
			t.Errorf("SocketInfo() = %q, want gso off, gro off", info)
		}
	}
	if cls[0].rx[0].slot != cfg.MaxDatagramBytes {
		t.Errorf("slot %d bytes without GRO, want MaxDatagramBytes %d", cls[0].rx[0].slot, cfg.MaxDatagramBytes)
	}
}

// FuzzGROSegmentBytes feeds arbitrary control data (the kernel writes it;
// a bad length must not read past it) to the UDP_GRO parser.
func FuzzGROSegmentBytes(f *testing.F) {
	msg := func(level, typ int32, data []byte) []byte {
		b := make([]byte, unix.CmsgSpace(len(data)))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[0]))
		h.Level, h.Type = level, typ
		h.SetLen(unix.CmsgLen(len(data)))
		copy(b[unix.CmsgLen(0):], data)
		return b
	}
	gro := msg(unix.SOL_UDP, unix.UDP_GRO, []byte{0xa4, 5, 0, 0})
	f.Add(gro)
	f.Add(append(msg(unix.SOL_IP, unix.IP_TTL, []byte{1, 0, 0, 0}), gro...))
	f.Add(msg(unix.SOL_UDP, unix.UDP_GRO, []byte{1, 2}))
	f.Add([]byte{})
	f.Add(make([]byte, 15))
	f.Fuzz(func(t *testing.T, control []byte) {
		buf := make([]byte, len(control)+8) // 8-aligned, as the kernel's is
		copy(buf, control)
		g := groSegmentBytes(buf[:len(control)])
		if g != 0 && len(control) < unix.CmsgLen(4) {
			t.Fatalf("segment size %d from %d bytes of control", g, len(control))
		}
		if string(control) == string(gro) && g != 1444 {
			t.Fatalf("segment size %d, want 1444", g)
		}
	})
}
