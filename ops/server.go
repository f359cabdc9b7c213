package ops

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
)

// Server serves a Surface on its listeners: HTTP on one address and the
// console on another. Two ports rather than one that sniffs the first
// bytes: a console line may begin with an HTTP verb, a proxy or a
// firewall can treat them apart, and a probe needs no console.
type Server struct {
	s       *Surface
	http    *http.Server
	httpLn  net.Listener
	conLn   net.Listener
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closeMu sync.Once
}

// Serve listens on httpAddr and consoleAddr ("" for none) and serves s
// there until ctx ends or Close; each address off loopback needs a token
// or TLS in auth (Auth.CheckListen, keys named by httpKey and
// consoleKey). With auth.TLS both listeners speak only TLS.
func Serve(ctx context.Context, s *Surface, auth Auth, httpKey, httpAddr, consoleKey, consoleAddr string) (*Server, error) {
	if err := auth.CheckListen(httpKey, httpAddr); err != nil {
		return nil, err
	}
	if err := auth.CheckListen(consoleKey, consoleAddr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	sv := &Server{s: s, cancel: cancel}
	if httpAddr != "" {
		ln, err := net.Listen("tcp", httpAddr)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("--%s %s: %w", httpKey, httpAddr, err)
		}
		ln = auth.Listen(NewLimitListener(ln, AdminMaxConns))
		sv.httpLn = ln
		sv.http = NewHTTPServer(s.Handler())
		sv.wg.Add(1)
		go func() {
			defer sv.wg.Done()
			_ = sv.http.Serve(ln) // returns at Close
		}()
	}
	if consoleAddr != "" {
		ln, err := net.Listen("tcp", consoleAddr)
		if err != nil {
			sv.Close()
			return nil, fmt.Errorf("--%s %s: %w", consoleKey, consoleAddr, err)
		}
		ln = auth.Listen(ln)
		sv.conLn = ln
		sv.wg.Add(1)
		go func() {
			defer sv.wg.Done()
			if err := s.ServeConsole(ctx, ln); err != nil && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("admin console stopped", "err", err)
			}
		}()
	}
	context.AfterFunc(ctx, func() { sv.Close() })
	return sv, nil
}

// HTTPAddr is the HTTP listener's address ("" when none).
func (sv *Server) HTTPAddr() string {
	if sv.httpLn == nil {
		return ""
	}
	return sv.httpLn.Addr().String()
}

// ConsoleAddr is the console listener's address ("" when none).
func (sv *Server) ConsoleAddr() string {
	if sv.conLn == nil {
		return ""
	}
	return sv.conLn.Addr().String()
}

// Close stops both listeners and their connections and waits for them.
func (sv *Server) Close() error {
	sv.closeMu.Do(func() {
		sv.cancel()
		if sv.http != nil {
			_ = sv.http.Close()
		}
		if sv.conLn != nil {
			_ = sv.conLn.Close()
		}
	})
	sv.wg.Wait()
	return nil
}
