package ops

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/seqd/seqd/internal/tlsconf"
)

// Surface is one process's admin surface: its command table, status,
// health and metrics. Handler serves it over HTTP, ServeConsole over a
// line-based TCP console; both run the same commands of the same Table.
type Surface struct {
	Table    *Table
	Registry *prometheus.Registry // what /metrics serves; register the role's collectors here

	status StatusProvider
	health Health
	member Member // set by MemberSurface: the older routes
	guard  guard
	log    *slog.Logger
}

// Health is a process's liveness and readiness: nil when live (ready),
// else the reason. Both are safe from any goroutine and quick (a probe
// calls them).
type Health interface {
	Live() error
	Ready() error
}

// HealthFuncs adapts two functions to Health; a nil one always answers nil.
type HealthFuncs struct {
	LiveFunc, ReadyFunc func() error
}

// Live calls LiveFunc.
func (h HealthFuncs) Live() error {
	if h.LiveFunc == nil {
		return nil
	}
	return h.LiveFunc()
}

// Ready calls ReadyFunc.
func (h HealthFuncs) Ready() error {
	if h.ReadyFunc == nil {
		return nil
	}
	return h.ReadyFunc()
}

// NewSurface builds the surface of a process: a Table with help, list,
// node and status (from st), health h (nil: always live and ready), and a
// registry holding the Go runtime's and the process's collectors.
// auth is who may call (Validate it first).
func NewSurface(auth Auth, st StatusProvider, h Health) *Surface {
	if h == nil {
		h = HealthFuncs{}
	}
	log := auth.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Surface{Table: NewTable(), Registry: prometheus.NewRegistry(), status: st, health: h, guard: newGuard(auth), log: log}
	s.Registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if st != nil {
		s.Table.MustAdd(Command{Name: "status", Help: "this process: kind, readiness and position", Run: func(context.Context, []string) (any, error) {
			return st.ProcessStatus(), nil
		}})
	}
	return s
}

// rawStatus is the provider's status, readiness unchecked.
func (s *Surface) rawStatus() ProcessStatus {
	if s.status != nil {
		return s.status.ProcessStatus()
	}
	return ProcessStatus{}
}

// Status is the process's status (with Ready and Reason from its health).
func (s *Surface) Status() ProcessStatus {
	p := s.rawStatus()
	if err := s.health.Ready(); err != nil {
		p.Ready, p.Reason = false, err.Error()
	} else {
		p.Ready, p.Reason = true, ""
	}
	return p
}

// Exec runs one command line for caller and returns its result; a
// mutating command is logged with who asked, before it runs and with its
// outcome.
func (s *Surface) Exec(ctx context.Context, line string, caller Caller) (any, error) {
	words, err := ParseLine(line)
	if err != nil {
		return nil, err
	}
	return s.run(ctx, words, caller)
}

func (s *Surface) run(ctx context.Context, words []string, caller Caller) (any, error) {
	c, args, err := s.Table.Lookup(words)
	if err != nil {
		return nil, err
	}
	if c.Name == "status" && len(args) == 0 {
		return s.Status(), nil
	}
	if !s.Table.Mutates(c, args) {
		return c.Run(ctx, args)
	}
	if !caller.Operator {
		s.log.Warn("admin: refused", "cmd", strings.Join(words, " "), "remote", caller.Remote, "token", caller.TokenID, "via", caller.Via, "err", ErrForbidden)
		return nil, fmt.Errorf("%w: %s changes something: it needs the operator token (this caller is %s)", ErrForbidden, c.Name, caller.TokenID)
	}
	t0 := time.Now()
	s.log.Info("admin: command", "cmd", strings.Join(words, " "), "remote", caller.Remote, "token", caller.TokenID, "via", caller.Via)
	res, err := c.Run(ctx, args)
	if err != nil {
		s.log.Warn("admin: command failed", "cmd", c.Name, "remote", caller.Remote, "token", caller.TokenID, "err", err, "ms", time.Since(t0).Milliseconds())
	} else {
		s.log.Info("admin: command done", "cmd", c.Name, "remote", caller.Remote, "token", caller.TokenID, "ms", time.Since(t0).Milliseconds())
	}
	return res, err
}

// Auth says who may use a surface: callers on loopback always; others
// only with Token (compared in constant time), and never when Token is
// empty. TokenID names the token in the log of mutating calls (default:
// "sha256:" and the first 8 hex digits of its hash, so the log never
// holds the token).
//
// Roles: loopback callers and the Token are operators (every command);
// ReadToken is read-only (status, metrics, lists: a command that changes
// something is refused with ErrForbidden before it runs), for monitoring
// that must not be able to move the primary or remove a member.
//
// With TLS set the listeners speak only TLS 1.3 (tlsconf.AdminServer)
// and the caller's certificate decides instead of its address: a
// certificate of the CA named admin-* or member-* is an operator, any
// other of the CA read-only (a Prometheus scraper's monitor-*, a node's),
// no certificate nothing but the probes (/healthz, /readyz) unless a
// token is presented. Loopback gives nothing: on a shared host any local
// user could otherwise act as the operator.
type Auth struct {
	Token     string
	TokenID   string
	ReadToken string
	TLS       *tlsconf.Identity
	Logger    *slog.Logger
}

// OperatorNames are the certificate name prefixes an admin surface with
// TLS treats as operators (docs/security.md).
var OperatorNames = []string{"admin-", "member-"}

// TokenEnv is the environment variable the seqd subcommands read the
// admin token from when no --admin-token is given.
const TokenEnv = "SEQD_ADMIN_TOKEN"

// CheckListen refuses a listening address off loopback when auth has no
// token and no TLS: key names the flag in the error.
func (a Auth) CheckListen(key, addr string) error {
	if addr == "" || a.Token != "" || a.ReadToken != "" || a.TLS != nil || IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("--%s %s is not a loopback address: set --admin-token (or %s) or the security.tls-* keys so that callers from elsewhere must prove who they are, or listen on 127.0.0.1", key, addr, TokenEnv)
}

// Client is a client of other surfaces with this auth's credentials: its
// token and, with TLS, its certificate.
func (a Auth) Client() *Client {
	c := &Client{Token: a.Token}
	if a.TLS != nil {
		c.TLS = a.TLS.Client(nil)
	}
	return c
}

// Listen wraps ln with the auth's TLS, if any (Serve does; a process
// with its own HTTP listener calls it).
func (a Auth) Listen(ln net.Listener) net.Listener {
	if a.TLS == nil {
		return ln
	}
	return tls.NewListener(ln, a.TLS.AdminServer())
}

// IsLoopback says whether a host:port (or a host) is on loopback;
// "localhost" counts, an empty host (every interface) does not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

type guard struct {
	token []byte
	id    string
	read  []byte // the read-only token
	tls   bool   // roles by certificate, not by address
}

func newGuard(a Auth) guard {
	g := guard{token: []byte(a.Token), id: a.TokenID, read: []byte(a.ReadToken), tls: a.TLS != nil}
	if a.Token != "" && g.id == "" {
		h := sha256.Sum256([]byte(a.Token))
		g.id = "sha256:" + hex.EncodeToString(h[:4])
	}
	return g
}

// allow decides for a caller at remote, with the certificate name cert
// ("" for none: TLS verified it against the CA), presenting token: who it
// is and whether it is an operator.
func (g guard) allow(remote, cert, token, via string) (Caller, error) {
	c := Caller{Remote: remote, Via: via}
	match := func(t []byte) bool {
		return token != "" && len(t) > 0 && subtle.ConstantTimeCompare([]byte(token), t) == 1
	}
	switch {
	case match(g.token):
		c.TokenID, c.Operator = g.id, true
		return c, nil
	case g.tls && cert != "":
		c.TokenID = "cert:" + cert
		for _, p := range OperatorNames {
			if strings.HasPrefix(cert, p) {
				c.Operator = true
			}
		}
		return c, nil
	case !g.tls && IsLoopback(remote):
		c.TokenID, c.Operator = "loopback", true
		return c, nil
	case match(g.read):
		c.TokenID = "read-only"
		return c, nil
	case g.tls && token == "":
		return c, fmt.Errorf("%w: %s presented no client certificate of the CA and no token", ErrUnauthorized, remote)
	case len(g.token) == 0 && len(g.read) == 0:
		return c, fmt.Errorf("%w: %s is not on loopback and this process has no admin token", ErrUnauthorized, remote)
	}
	return c, fmt.Errorf("%w: %s: missing or wrong token", ErrUnauthorized, remote)
}

// Answer is the JSON answer of POST /v1/cmd.
type Answer struct {
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Text   string          `json:"text,omitempty"` // a result that is text
	Error  string          `json:"error,omitempty"`
}

// CommandInfo describes one command (GET /v1/commands).
type CommandInfo struct {
	Name    string `json:"name"`
	Args    string `json:"args,omitempty"`
	Help    string `json:"help"`
	Mutates bool   `json:"mutates"`
}

// CmdRequest is the body of POST /v1/cmd: a Line in the command
// language, or a Cmd with its Args as words.
type CmdRequest struct {
	Line string   `json:"line,omitempty"`
	Cmd  string   `json:"cmd,omitempty"`
	Args []string `json:"args,omitempty"`
}

// Handler serves the surface over HTTP:
//
//	GET  /v1/status     ProcessStatus
//	GET  /v1/commands   []CommandInfo
//	POST /v1/cmd        CmdRequest -> Answer
//	GET  /metrics       Prometheus text format
//	GET  /healthz       200 "ok", or 503 and the reason
//	GET  /readyz        200 "ready", or 503 and the reason
//
// Callers off loopback present the token as "Authorization: Bearer
// TOKEN"; /healthz and /readyz need none (probes; they say no more than
// ready or not and why).
func (s *Surface) Handler() http.Handler {
	mux := http.NewServeMux()
	s.mount(mux)
	if s.member != nil {
		s.mountMember(mux)
	}
	return mux
}

func (s *Surface) mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		probe(w, s.health.Live(), "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		probe(w, s.health.Ready(), "ready")
	})
	metrics := promhttp.HandlerFor(s.Registry, promhttp.HandlerOpts{ErrorLog: slogPrinter{s.log}})
	mux.Handle("GET /metrics", s.authed(func(w http.ResponseWriter, r *http.Request, _ Caller) {
		metrics.ServeHTTP(w, r)
	}))
	mux.Handle("GET /v1/status", s.authed(func(w http.ResponseWriter, r *http.Request, _ Caller) {
		if r.URL.Query().Get("ready") == "skip" {
			// Without the readiness check: what a standby's own
			// readiness check asks of the primary, so that members
			// with stale views never ask each other in a circle.
			writeJSON(w, s.rawStatus())
			return
		}
		writeJSON(w, s.Status())
	}))
	mux.Handle("GET /v1/commands", s.authed(func(w http.ResponseWriter, r *http.Request, _ Caller) {
		var out []CommandInfo
		for _, c := range s.Table.Commands() {
			out = append(out, CommandInfo{Name: c.Name, Args: c.Args, Help: c.Help, Mutates: c.Mutates})
		}
		writeJSON(w, out)
	}))
	mux.Handle("POST /v1/cmd", s.authed(func(w http.ResponseWriter, r *http.Request, who Caller) {
		var req CmdRequest
		if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&req); err != nil {
			answer(w, nil, fmt.Errorf("%w: body: %v", ErrBadArgs, err))
			return
		}
		var (
			res any
			err error
		)
		if req.Line != "" {
			res, err = s.Exec(r.Context(), req.Line, who)
		} else {
			res, err = s.run(r.Context(), append([]string{req.Cmd}, req.Args...), who)
		}
		answer(w, res, err)
	}))
}

// authed wraps h with the guard.
func (s *Surface) authed(h func(http.ResponseWriter, *http.Request, Caller)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		cert := ""
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cert = tlsconf.NameOf(r.TLS.PeerCertificates[0])
		}
		who, err := s.guard.allow(r.RemoteAddr, cert, tok, "http")
		if err != nil {
			s.log.Warn("admin: refused", "remote", r.RemoteAddr, "path", r.URL.Path, "err", err)
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		h(w, r, who)
	})
}

func probe(w http.ResponseWriter, err error, ok string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, err.Error())
		return
	}
	fmt.Fprintln(w, ok)
}

// answer writes an Answer for res, err with the status err maps to.
func answer(w http.ResponseWriter, res any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(httpStatus(err))
		_ = json.NewEncoder(w).Encode(Answer{Error: err.Error()})
		return
	}
	a := Answer{OK: true}
	if t, ok := res.(string); ok {
		a.Text = t
	} else if res != nil {
		b, err := json.Marshal(res)
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			_ = json.NewEncoder(w).Encode(Answer{Error: "encoding the result: " + err.Error()})
			return
		}
		a.Result = b
	}
	_ = json.NewEncoder(w).Encode(a)
}

// slogPrinter is promhttp's error log.
type slogPrinter struct{ log *slog.Logger }

func (p slogPrinter) Println(v ...any) { p.log.Warn("metrics: " + fmt.Sprint(v...)) }

// errorStatus extends httpStatus with the command language's errors.
func errorStatus(err error) (int, bool) {
	switch {
	case errors.Is(err, ErrSyntax), errors.Is(err, ErrBadArgs), errors.Is(err, ErrUnknownCommand):
		return http.StatusBadRequest, true
	case errors.Is(err, ErrNotSupported):
		return http.StatusNotImplemented, true
	case errors.Is(err, ErrUnauthorized):
		return http.StatusUnauthorized, true
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden, true
	case errors.Is(err, ErrNotReady):
		return http.StatusServiceUnavailable, true
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout, true
	}
	return 0, false
}
