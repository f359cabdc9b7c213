package drill

import (
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// tcpLink stands between a bridge's receiving end and a sending end's TCP
// channel, so that the drill can cut it: Cut closes every connection and
// refuses new ones (accepted, then closed at once) until Heal.
type tcpLink struct {
	l      net.Listener
	target string
	cut    atomic.Bool
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
}

func newTCPLink(addr, target string) (*tcpLink, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	t := &tcpLink{l: l, target: target, conns: map[net.Conn]struct{}{}}
	t.wg.Add(1)
	go t.accept()
	return t, nil
}

func (t *tcpLink) Addr() string { return t.l.Addr().String() }

func (t *tcpLink) accept() {
	defer t.wg.Done()
	for {
		c, err := t.l.Accept()
		if err != nil {
			return
		}
		if t.cut.Load() {
			c.Close()
			continue
		}
		u, err := net.Dial("tcp", t.target)
		if err != nil {
			c.Close()
			continue
		}
		t.mu.Lock()
		t.conns[c], t.conns[u] = struct{}{}, struct{}{}
		t.mu.Unlock()
		go t.pipe(c, u)
		go t.pipe(u, c)
	}
}

func (t *tcpLink) pipe(dst, src net.Conn) {
	buf := make([]byte, 256<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	dst.Close()
	src.Close()
	t.mu.Lock()
	delete(t.conns, dst)
	delete(t.conns, src)
	t.mu.Unlock()
}

// Cut drops every connection and refuses new ones.
func (t *tcpLink) Cut() {
	t.cut.Store(true)
	t.mu.Lock()
	for c := range t.conns {
		c.Close()
	}
	t.mu.Unlock()
}

// Heal lets connections through again.
func (t *tcpLink) Heal() { t.cut.Store(false) }

func (t *tcpLink) Close() {
	t.Cut()
	t.l.Close()
	t.wg.Wait()
}

// udpLink relays a UDP flow both ways: datagrams from the sending end go
// to the receiving end's address, datagrams from the receiving end (the
// commands) go back to where the sending end's came from. Cut drops
// everything until Heal.
type udpLink struct {
	c      *net.UDPConn
	to     netip.AddrPort
	cut    atomic.Bool
	passed atomic.Uint64
	drops  atomic.Uint64
	done   chan struct{}
}

func newUDPLink(addr, to string) (*udpLink, error) {
	la, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	c, err := net.ListenUDP("udp", la)
	if err != nil {
		return nil, err
	}
	_ = c.SetReadBuffer(8 << 20)
	_ = c.SetWriteBuffer(8 << 20)
	u := &udpLink{c: c, to: netip.MustParseAddrPort(to), done: make(chan struct{})}
	go u.relay()
	return u, nil
}

func (u *udpLink) Addr() string { return u.c.LocalAddr().String() }

func (u *udpLink) relay() {
	defer close(u.done)
	buf := make([]byte, 65536)
	var back netip.AddrPort
	for {
		n, from, err := u.c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		if u.cut.Load() {
			u.drops.Add(1)
			continue
		}
		dst := u.to
		if from.Port() == u.to.Port() && from.Addr().Unmap() == u.to.Addr().Unmap() {
			if !back.IsValid() {
				continue
			}
			dst = back
		} else {
			back = from
		}
		if _, err := u.c.WriteToUDPAddrPort(buf[:n], dst); err == nil {
			u.passed.Add(1)
		}
	}
}

func (u *udpLink) Cut()  { u.cut.Store(true) }
func (u *udpLink) Heal() { u.cut.Store(false) }

func (u *udpLink) Close() {
	u.c.Close()
	<-u.done
}
