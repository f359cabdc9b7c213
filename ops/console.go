package ops

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/internal/logging"
	"github.com/seqd/seqd/internal/tlsconf"
)

// The console: the command language over a plain TCP connection (telnet
// or nc), one command a line. Each answer is the result's text (or its
// JSON, indented), or "error: " and the error, followed by a prompt line
// "> ". A caller off loopback first says `auth TOKEN`; `quit` ends the
// connection. With TLS (Auth.TLS) the console speaks only TLS (openssl
// s_client with the caller's certificate) and the certificate decides
// the role, as on HTTP.

// Console bounds: a line, the connections served at once, the silence
// after which a connection is closed.
const (
	consoleMaxLine  = 4096
	consoleMaxConns = 16
	consoleIdle     = 10 * time.Minute
	// consoleHandshake bounds a TLS console's handshake.
	consoleHandshake = 5 * time.Second
)

// consoleRefusals bounds the log of refused console handshakes (a
// scanner must not flood the log): one line per 10 s, with the count of
// those not logged.
var consoleRefusals = logging.NewLimiter(10*time.Second, nil)

// ServeConsole serves the console on ln until ctx ends or ln is closed;
// it returns nil then. Each connection runs on its own goroutine; at most
// consoleMaxConns at once (more are told so and closed).
func (s *Surface) ServeConsole(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	defer func() {
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		mu.Lock()
		if len(conns) >= consoleMaxConns {
			mu.Unlock()
			fmt.Fprintf(c, "error: %d console connections already\n", consoleMaxConns)
			c.Close()
			continue
		}
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.console(ctx, c)
			mu.Lock()
			delete(conns, c)
			mu.Unlock()
			c.Close()
		}()
	}
}

func (s *Surface) console(ctx context.Context, c net.Conn) {
	remote := c.RemoteAddr().String()
	if tc, ok := c.(*tls.Conn); ok {
		// The handshake before the greeting, within a bound: the
		// certificate decides the caller's role.
		_ = c.SetDeadline(time.Now().Add(consoleHandshake))
		if err := tc.HandshakeContext(ctx); err != nil {
			if ok, n := consoleRefusals.Allow("tls"); ok {
				s.log.Warn("admin console: tls handshake failed", "remote", remote, "err", tlsconf.Explain(remote, err), "not_logged", n)
			}
			return
		}
		_ = c.SetDeadline(time.Time{})
	}
	cert := tlsconf.PeerName(c)
	who, authErr := s.guard.allow(remote, cert, "", "console")
	w := bufio.NewWriter(c)
	st := s.rawStatus()
	name := st.Name
	if name == "" {
		name = st.Process
	}
	fmt.Fprintf(w, "seqd %s: admin console (help lists the commands, quit ends)\n", name)
	if authErr != nil {
		if s.guard.tls {
			fmt.Fprintln(w, "auth TOKEN first: this connection presented no client certificate")
		} else {
			fmt.Fprintln(w, "auth TOKEN first: this connection is not from loopback")
		}
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 512), consoleMaxLine)
	for {
		fmt.Fprint(w, "> ")
		if w.Flush() != nil {
			return
		}
		_ = c.SetReadDeadline(time.Now().Add(consoleIdle))
		if !sc.Scan() {
			if errors.Is(sc.Err(), bufio.ErrTooLong) {
				fmt.Fprintf(w, "error: a line is at most %d bytes\n", consoleMaxLine)
				_ = w.Flush()
			}
			return
		}
		line := strings.TrimSpace(stripTelnet(sc.Text()))
		if line == "" {
			continue
		}
		words, err := ParseLine(line)
		switch {
		case err != nil:
		case words[0] == "quit" || words[0] == "exit":
			fmt.Fprintln(w, "bye")
			_ = w.Flush()
			return
		case words[0] == "auth":
			if len(words) != 2 {
				err = fmt.Errorf("%w: auth TOKEN", ErrBadArgs)
				break
			}
			var got Caller
			if got, err = s.guard.allow(remote, cert, words[1], "console"); err == nil {
				who, authErr = got, nil
				fmt.Fprintf(w, "authenticated as %s\n", who.TokenID)
				continue
			}
		case authErr != nil:
			err = authErr
		default:
			var res any
			if res, err = s.run(ctx, words, who); err == nil {
				writeResult(w, res)
				continue
			}
		}
		fmt.Fprintf(w, "error: %v\n", err)
	}
}

// writeResult prints a console answer: text as it is, anything else as
// indented JSON.
func writeResult(w io.Writer, res any) {
	switch v := res.(type) {
	case nil:
		fmt.Fprintln(w, "ok")
	case string:
		fmt.Fprintln(w, v)
	default:
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			fmt.Fprintf(w, "error: encoding the result: %v\n", err)
			return
		}
		fmt.Fprintf(w, "%s\n", b)
	}
}

// stripTelnet drops telnet option negotiation (IAC sequences) a telnet
// client may send before or within a line.
func stripTelnet(s string) string {
	if strings.IndexByte(s, 0xff) < 0 {
		return s
	}
	b := []byte(s)
	out := b[:0]
	for i := 0; i < len(b); i++ {
		if b[i] != 0xff {
			out = append(out, b[i])
			continue
		}
		if i+1 < len(b) && b[i+1] >= 251 && b[i+1] <= 254 {
			i += 2 // WILL/WONT/DO/DONT option
		} else {
			i++ // a two-byte command
		}
	}
	return string(out)
}
