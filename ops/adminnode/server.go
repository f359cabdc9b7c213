package adminnode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/ops/page"
)

// ErrConfig: a Config field is out of range; the error names it.
var ErrConfig = errors.New("adminnode: bad config")

// Config says where the admin node listens.
type Config struct {
	// HTTPAddr serves the page (/ui/), GET /v1/deployment (the page's
	// Status as JSON) and POST /v1/command (a console line in the body).
	HTTPAddr string
	// ConsoleAddr serves the line console (telnet, nc); "" for none.
	ConsoleAddr string
	// MaxConsoleSessions bounds the console's connections at once.
	MaxConsoleSessions int
	// ConsoleIdle ends a console session silent this long.
	ConsoleIdle time.Duration
	// CommandTimeout bounds one command.
	CommandTimeout time.Duration
	Page           page.Config
	Logger         *slog.Logger
}

// DefaultConfig listens on loopback (the admin surface is for the
// operator's host unless told otherwise).
func DefaultConfig() Config {
	return Config{HTTPAddr: "127.0.0.1:7400", ConsoleAddr: "127.0.0.1:7402", MaxConsoleSessions: 16,
		ConsoleIdle: 10 * time.Minute, CommandTimeout: 10 * time.Second, Page: page.DefaultConfig()}
}

// Validate names the first field out of range.
func (c Config) Validate() error {
	switch {
	case c.HTTPAddr == "":
		return config.New(ErrConfig, "HTTPAddr", "", "host:port")
	case c.MaxConsoleSessions < 1 || c.MaxConsoleSessions > 1024:
		return config.New(ErrConfig, "MaxConsoleSessions", c.MaxConsoleSessions, "1..1024")
	case c.ConsoleIdle < time.Second:
		return config.New(ErrConfig, "ConsoleIdle", c.ConsoleIdle, ">= 1s")
	case c.CommandTimeout < 100*time.Millisecond:
		return config.New(ErrConfig, "CommandTimeout", c.CommandTimeout, ">= 100ms")
	}
	return c.Page.Validate()
}

// Server is the admin node's two listeners over one Deployment.
type Server struct {
	cfg     Config
	log     *slog.Logger
	page    *page.Handler
	console *Console
	httpLn  net.Listener
	conLn   net.Listener
	srv     *http.Server

	mu    sync.Mutex // guards conns
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewServer listens on cfg's addresses; Serve serves.
func NewServer(cfg Config, d *Deployment) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	pg, err := page.New(cfg.Page, d.Source())
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log, page: pg, conns: map[net.Conn]struct{}{}}
	s.console = NewConsole(d, pg.Status)
	if s.httpLn, err = net.Listen("tcp", cfg.HTTPAddr); err != nil {
		return nil, err
	}
	if cfg.ConsoleAddr != "" {
		if s.conLn, err = net.Listen("tcp", cfg.ConsoleAddr); err != nil {
			s.httpLn.Close()
			return nil, err
		}
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", http.StripPrefix("/ui", pg))
	mux.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	mux.HandleFunc("GET /v1/deployment", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(pg.Status(r.Context()))
	})
	mux.HandleFunc("POST /v1/command", func(w http.ResponseWriter, r *http.Request) {
		line, _ := io.ReadAll(io.LimitReader(r.Body, 4096))
		out, err := s.exec(r.Context(), string(line), r.RemoteAddr)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, out)
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return s, nil
}

// HTTPAddr and ConsoleAddr are the addresses listened on ("" when none).
func (s *Server) HTTPAddr() string { return s.httpLn.Addr().String() }

// ConsoleAddr is the console's address ("" when none).
func (s *Server) ConsoleAddr() string {
	if s.conLn == nil {
		return ""
	}
	return s.conLn.Addr().String()
}

// exec runs a command for who, logging the ones that change something.
func (s *Server) exec(ctx context.Context, line, who string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
	defer cancel()
	f := strings.Fields(line)
	mutating := len(f) > 0 && f[0] == "transfer-primary"
	out, err := s.console.Exec(ctx, line)
	if mutating {
		s.log.Info("admin-node: command", "command", strings.Join(f, " "), "from", who, "err", err)
	}
	return out, err
}

// Serve serves until ctx ends, then closes both listeners and every
// console session and returns.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 2)
	go func() { errc <- s.srv.Serve(s.httpLn) }()
	if s.conLn != nil {
		go func() { errc <- s.acceptConsole() }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.close()
	if errors.Is(err, http.ErrServerClosed) || errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

func (s *Server) close() {
	s.srv.Close()
	if s.conLn != nil {
		s.conLn.Close()
	}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Server) acceptConsole() error {
	for {
		c, err := s.conLn.Accept()
		if err != nil {
			return err
		}
		s.mu.Lock()
		if len(s.conns) >= s.cfg.MaxConsoleSessions {
			s.mu.Unlock()
			_, _ = io.WriteString(c, "error: too many console sessions\n")
			c.Close()
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.session(c)
	}
}

// session reads command lines from c and answers each: the answer, then
// "ok" or "error: ..." on a line of its own, so a script knows where an
// answer ends.
func (s *Server) session(c net.Conn) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		c.Close()
	}()
	w := bufio.NewWriter(c)
	_, _ = w.WriteString("seqd admin node: type help\n")
	_ = w.Flush()
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 4096), 4096)
	for {
		_ = c.SetReadDeadline(time.Now().Add(s.cfg.ConsoleIdle))
		if !sc.Scan() {
			return
		}
		line := strings.TrimSpace(sc.Text())
		if line == "quit" || line == "exit" {
			return
		}
		if line == "" {
			continue
		}
		out, err := s.exec(context.Background(), line, c.RemoteAddr().String())
		_, _ = w.WriteString(out)
		if err != nil {
			_, _ = w.WriteString("error: " + err.Error() + "\n")
		} else {
			_, _ = w.WriteString("ok\n")
		}
		_ = c.SetWriteDeadline(time.Now().Add(10 * time.Second))
		if w.Flush() != nil {
			return
		}
	}
}
