package ops

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds of an admin HTTP listener (issue 16: the admin listener had a
// header deadline only, so idle or slow connections were kept for good).
const (
	// AdminMaxConns is the most connections an admin listener holds at
	// once; one more is closed as soon as it is accepted (counted).
	AdminMaxConns = 64
	// AdminReadTimeout bounds reading a whole request, AdminWriteTimeout
	// writing its answer (a transfer waits for the handover), and
	// AdminIdleTimeout a kept-alive connection between requests.
	AdminReadTimeout  = 10 * time.Second
	AdminWriteTimeout = 60 * time.Second
	AdminIdleTimeout  = 60 * time.Second
)

// NewHTTPServer is the http.Server of an admin surface: deadlines on the
// header, the request, the answer and idle connections, and a 64 KiB
// header cap.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       AdminReadTimeout,
		WriteTimeout:      AdminWriteTimeout,
		IdleTimeout:       AdminIdleTimeout,
		MaxHeaderBytes:    64 << 10,
		// The server's own complaints (a refused TLS handshake, a
		// plain request to a TLS port) in the process's log format.
		ErrorLog: slog.NewLogLogger(slog.Default().Handler(), slog.LevelWarn),
	}
}

// LimitListener caps the connections ln hands out at max: beyond, an
// accepted connection is closed at once and counted (Refused), so that
// callers cannot hold the process's memory or descriptors by opening
// connections.
type LimitListener struct {
	net.Listener
	sem     chan struct{}
	refused atomic.Uint64
}

// NewLimitListener wraps ln with a cap of max connections.
func NewLimitListener(ln net.Listener, max int) *LimitListener {
	return &LimitListener{Listener: ln, sem: make(chan struct{}, max)}
}

// Accept returns the next connection within the cap.
func (l *LimitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		select {
		case l.sem <- struct{}{}:
			return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
		default:
			// Counted before the close: whoever sees the connection end
			// sees it counted.
			l.refused.Add(1)
			c.Close()
		}
	}
}

// Refused is the number of connections closed because the cap was
// reached.
func (l *LimitListener) Refused() uint64 { return l.refused.Load() }

type limitConn struct {
	net.Conn
	release func()
	once    sync.Once
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
