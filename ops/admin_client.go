package ops

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/seqd/seqd/fsm"
	"github.com/seqd/seqd/internal/tlsconf"
)

// Client talks to admin surfaces, for `seqd admin`, drills and tests.
// Each call is bounded by its ctx. Its errors say what was asked of
// which address in words a user acts on, never a raw `Get "http://..."`.
type Client struct {
	HTTP  *http.Client // nil: a plain one (or one of TLS)
	Token string       // sent as a bearer token (needed off loopback)
	// TLS: the surfaces speak TLS (Auth.TLS); this is the client's
	// certificate and the CA (tlsconf.Identity.Client). Nil: plain HTTP.
	TLS *tls.Config

	once  sync.Once
	tlsHC *http.Client
}

// httpClient is the HTTP client requests go through.
func (c *Client) httpClient() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	if c.TLS == nil {
		return http.DefaultClient
	}
	c.once.Do(func() {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = c.TLS
		c.tlsHC = &http.Client{Transport: tr}
	})
	return c.tlsHC
}

// scheme is the URL scheme of c's requests.
func (c *Client) scheme() string {
	if c.TLS != nil {
		return "https://"
	}
	return "http://"
}

// DefaultClient has no token: enough on loopback.
var DefaultClient = &Client{}

// FetchStatus asks the member at addr for its status.
func FetchStatus(ctx context.Context, addr string) (MemberStatus, error) {
	return DefaultClient.FetchStatus(ctx, addr)
}

// FetchAll asks every member that from lists for its status, in
// parallel, in the order of the list.
func FetchAll(ctx context.Context, from MemberStatus) []MemberAnswer {
	return DefaultClient.FetchAll(ctx, from)
}

// RequestTransfer asks the primary at addr to hand its role to member to
// (0: any standby) and returns the outcome.
func RequestTransfer(ctx context.Context, addr string, to uint64) (Handover, error) {
	return DefaultClient.RequestTransfer(ctx, addr, to)
}

// RequestAddMember asks the primary at addr to add m as a voter.
func RequestAddMember(ctx context.Context, addr string, m fsm.Member) error {
	return DefaultClient.RequestAddMember(ctx, addr, m)
}

// RequestRemoveMember asks the primary at addr to remove member id.
func RequestRemoveMember(ctx context.Context, addr string, id uint64) error {
	return DefaultClient.RequestRemoveMember(ctx, addr, id)
}

// FetchProcess asks the process at addr for its status.
func (c *Client) FetchProcess(ctx context.Context, addr string) (ProcessStatus, error) {
	var s ProcessStatus
	err := c.call(ctx, http.MethodGet, addr, "/v1/status", nil, &s)
	return s, err
}

// FetchStatus asks the member at addr for its status; ErrNotMember when
// addr is another kind of process.
func (c *Client) FetchStatus(ctx context.Context, addr string) (MemberStatus, error) {
	return c.fetchMember(ctx, addr, "/v1/status")
}

func (c *Client) fetchMember(ctx context.Context, addr, path string) (MemberStatus, error) {
	var p ProcessStatus
	if err := c.call(ctx, http.MethodGet, addr, path, nil, &p); err != nil {
		return MemberStatus{}, err
	}
	if p.Member == nil {
		return MemberStatus{}, fmt.Errorf("%w: %s is a %s", ErrNotMember, addr, p.Process)
	}
	return *p.Member, nil
}

// MemberAnswer is one member's status, or why it could not be read.
type MemberAnswer struct {
	Member Peer
	Status MemberStatus
	Err    error
}

// FetchAll asks every member that from lists for its status, in
// parallel, in the order of the list.
func (c *Client) FetchAll(ctx context.Context, from MemberStatus) []MemberAnswer {
	out := make([]MemberAnswer, len(from.Members))
	var wg sync.WaitGroup
	for i, m := range from.Members {
		out[i].Member = m
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i].Status, out[i].Err = c.FetchStatus(ctx, m.AdminAddr)
		}()
	}
	wg.Wait()
	return out
}

// Exec runs one command line on the process at addr. A result that is
// text comes back as a string; any other decodes into out (when not nil)
// and comes back as its JSON.
func (c *Client) Exec(ctx context.Context, addr, line string, out any) (string, error) {
	var a Answer
	if err := c.call(ctx, http.MethodPost, addr, "/v1/cmd", CmdRequest{Line: line}, &a); err != nil {
		return "", err
	}
	if a.Text != "" || len(a.Result) == 0 {
		return a.Text, nil
	}
	if out != nil {
		if err := json.Unmarshal(a.Result, out); err != nil {
			return "", fmt.Errorf("ops: %s at %s: the answer does not decode: %v", line, addr, err)
		}
	}
	return string(a.Result), nil
}

// RequestTransfer asks the primary at addr to hand its role to member to
// (0: any standby) and returns the outcome.
func (c *Client) RequestTransfer(ctx context.Context, addr string, to uint64) (Handover, error) {
	var h Handover
	line := "transfer-primary"
	if to != 0 {
		line += " " + strconv.FormatUint(to, 10)
	}
	_, err := c.Exec(ctx, addr, line, &h)
	return h, err
}

// RequestAddMember asks the primary at addr to add m as a voter.
func (c *Client) RequestAddMember(ctx context.Context, addr string, m fsm.Member) error {
	spec := strconv.FormatUint(m.ID, 10) + "@" + m.RaftAddr + "@" + m.AdminAddr
	if m.StreamAddr != "" {
		spec += "@" + m.StreamAddr
	}
	_, err := c.Exec(ctx, addr, "add-member "+spec, nil)
	return err
}

// RequestRemoveMember asks the primary at addr to remove member id.
func (c *Client) RequestRemoveMember(ctx context.Context, addr string, id uint64) error {
	_, err := c.Exec(ctx, addr, "remove-member "+strconv.FormatUint(id, 10), nil)
	return err
}

// Ready asks the process at addr whether it is ready: nil, or an
// ErrNotReady error with its reason, or why it could not be asked.
func (c *Client) Ready(ctx context.Context, addr string) error {
	var body string
	err := c.do(ctx, http.MethodGet, addr, "/readyz", nil, func(status int, b []byte) error {
		body = string(bytes.TrimSpace(b))
		switch status {
		case http.StatusOK:
			return nil
		case http.StatusServiceUnavailable:
			return nil
		}
		return fmt.Errorf("ops: GET /readyz at %s: %d %s", addr, status, body)
	})
	if err != nil {
		return err
	}
	if body != "ready" {
		msg, _ := strings.CutPrefix(body, ErrNotReady.Error()+": ")
		return fmt.Errorf("%w: %s", ErrNotReady, msg)
	}
	return nil
}

// remoteError is an error the endpoint answered: its text, and the
// sentinel its status stands for.
type remoteError struct {
	kind error
	msg  string
}

func (e *remoteError) Error() string { return e.msg }
func (e *remoteError) Unwrap() error { return e.kind }

// statusKinds are the sentinels the surface's statuses stand for
// (httpStatus, errorStatus).
var statusKinds = map[int]error{
	http.StatusMisdirectedRequest:  ErrNotPrimary,
	http.StatusNotFound:            ErrUnknownMember,
	http.StatusPreconditionFailed:  ErrTooFewVoters,
	http.StatusConflict:            ErrAlreadyPrimary,
	http.StatusBadRequest:          ErrBadArgs,
	http.StatusNotImplemented:      ErrNotSupported,
	http.StatusUnauthorized:        ErrUnauthorized,
	http.StatusServiceUnavailable:  ErrNotReady,
	http.StatusInternalServerError: nil,
}

// call does one request to an admin surface and decodes the JSON answer
// into out.
func (c *Client) call(ctx context.Context, method, addr, path string, body any, out any) error {
	return c.do(ctx, method, addr, path, body, func(status int, b []byte) error {
		if status == http.StatusOK {
			if err := json.Unmarshal(b, out); err != nil {
				return fmt.Errorf("ops: %s at %s is no seqd admin endpoint (%s %s: %v)", addr, addr, method, path, err)
			}
			return nil
		}
		msg := string(bytes.TrimSpace(b))
		if status == http.StatusBadRequest && c.TLS == nil && strings.Contains(msg, "HTTP request to an HTTPS server") {
			return fmt.Errorf("%w: %s speaks only TLS: give this process the security.tls-* keys (a certificate of its CA)", ErrUnauthorized, addr)
		}
		var a Answer
		if json.Unmarshal(b, &a) == nil && a.Error != "" {
			msg = a.Error
		}
		kind, known := statusKinds[status]
		if !known || kind == nil {
			return fmt.Errorf("ops: %s %s at %s: %d %s: %s", method, path, addr, status, http.StatusText(status), msg)
		}
		// The member's text names the sentinel already ("ops: not
		// primary: member 2; the leader is ..."); another's may not.
		if !strings.Contains(msg, kind.Error()) {
			msg = kind.Error() + ": " + msg
		}
		return &remoteError{kind: kind, msg: msg}
	})
}

// do sends one request and hands the answer's status and body to read.
func (c *Client) do(ctx context.Context, method, addr, path string, body any, read func(int, []byte) error) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.scheme()+addr+path, rd)
	if err != nil {
		return fmt.Errorf("%w: %q: %v", ErrBadAddr, addr, err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.httpClient().Do(req)
	if err != nil {
		return reachError(addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return reachError(addr, err)
	}
	return read(resp.StatusCode, b)
}

// reachError says in words why addr could not be asked (ErrUnreachable),
// without the transport's `Get "http://..."` wrapping.
func reachError(addr string, err error) error {
	var why string
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var (
		dns *net.DNSError
		rec tls.RecordHeaderError
		cve *tls.CertificateVerificationError
	)
	switch {
	case tlsconf.IsRemoteAlert(err), errors.As(err, &rec), errors.As(err, &cve),
		errors.Is(err, tlsconf.ErrUnknownCA), errors.Is(err, tlsconf.ErrIdentity), errors.Is(err, tlsconf.ErrNoCertificate):
		why = tlsconf.Explain(addr, err).Error()
	case errors.Is(err, context.DeadlineExceeded):
		why = "no answer before the timeout"
	case errors.Is(err, context.Canceled):
		why = "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused (no process listens there)"
	case errors.As(err, &dns):
		why = "unknown host " + dns.Name
	default:
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Err != nil {
			why = oe.Err.Error()
		} else {
			why = err.Error()
		}
	}
	return fmt.Errorf("%w: %s: %s", ErrUnreachable, addr, why)
}
