package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// Config names the three PEM files of a process's TLS. All three or none
// (TLS off). Keys name them in errors: the configuration keys
// ("security.tls-cert", ...) when set, else the field names.
type Config struct {
	CertFile string // this process's certificate (PEM; a chain may follow it)
	KeyFile  string // its private key (PEM, PKCS#8, PKCS#1 or EC)
	CAFile   string // the CA certificates every peer's chain must reach (PEM)
	// CertKey, KeyKey and CAKey name the files' settings in errors.
	CertKey, KeyKey, CAKey string
}

// DefaultConfig names the settings as seqd's command does.
func DefaultConfig() Config {
	return Config{CertKey: "security.tls-cert", KeyKey: "security.tls-key", CAKey: "security.tls-ca"}
}

func (c Config) keys() (cert, key, ca string) {
	cert, key, ca = c.CertKey, c.KeyKey, c.CAKey
	if cert == "" {
		cert = "CertFile"
	}
	if key == "" {
		key = "KeyFile"
	}
	if ca == "" {
		ca = "CAFile"
	}
	return cert, key, ca
}

// Enabled reports whether any file is set (Validate wants all three).
func (c Config) Enabled() bool { return c.CertFile != "" || c.KeyFile != "" || c.CAFile != "" }

// Validate wants all three files or none; it does not read them (Load
// does).
func (c Config) Validate() error {
	if !c.Enabled() {
		return nil
	}
	ck, kk, ak := c.keys()
	for _, f := range []struct{ key, v string }{{ck, c.CertFile}, {kk, c.KeyFile}, {ak, c.CAFile}} {
		if f.v == "" {
			return fmt.Errorf("%w: %s is empty: TLS needs %s, %s and %s together", ErrConfig, f.key, ck, kk, ak)
		}
	}
	return nil
}

// Identity is a loaded Config: this process's certificate and key, its
// name, and the CA pool peers are checked against.
type Identity struct {
	cert tls.Certificate
	leaf *x509.Certificate
	pool *x509.CertPool
	name string
}

// Load reads c's files: nil, nil when TLS is off. A missing or unreadable
// file, a file with no PEM certificate or key, a key that is not the
// certificate's, a certificate expired or not yet valid, or one that the
// CA did not sign, is an error naming the setting and the file.
func Load(c Config) (*Identity, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if !c.Enabled() {
		return nil, nil
	}
	ck, kk, ak := c.keys()
	read := func(key, path string) ([]byte, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("%w: %s %s: %w", ErrConfig, key, path, err)
		}
		if blk, _ := pem.Decode(b); blk == nil {
			return nil, fmt.Errorf("%w: %s %s: no PEM block in the file", ErrConfig, key, path)
		}
		return b, nil
	}
	certPEM, err := read(ck, c.CertFile)
	if err != nil {
		return nil, err
	}
	keyPEM, err := read(kk, c.KeyFile)
	if err != nil {
		return nil, err
	}
	caPEM, err := read(ak, c.CAFile)
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%w: %s %s with %s %s: %w", ErrConfig, ck, c.CertFile, kk, c.KeyFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("%w: %s %s: no certificate in the file", ErrConfig, ak, c.CAFile)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("%w: %s %s: %w", ErrConfig, ck, c.CertFile, err)
		}
	}
	now := time.Now()
	if now.After(leaf.NotAfter) {
		return nil, fmt.Errorf("%w: %s %s expired at %s", ErrConfig, ck, c.CertFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return nil, fmt.Errorf("%w: %s %s is valid only from %s", ErrConfig, ck, c.CertFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	if err := verify(leaf, cert.Certificate[1:], pool); err != nil {
		return nil, fmt.Errorf("%w: %s %s is not signed by %s %s: %w", ErrConfig, ck, c.CertFile, ak, c.CAFile, err)
	}
	name := NameOf(leaf)
	if name == "" {
		return nil, fmt.Errorf("%w: %s %s names no identity (a URI SAN seqd://NAME or a subject CN)", ErrConfig, ck, c.CertFile)
	}
	return &Identity{cert: cert, leaf: leaf, pool: pool, name: name}, nil
}

// Name is this process's identity (NameOf its certificate).
func (id *Identity) Name() string { return id.name }

// NameOf is a certificate's identity: the host of its first URI SAN of
// scheme seqd (seqd://member-2), else its subject's common name.
func NameOf(c *x509.Certificate) string {
	for _, u := range c.URIs {
		if u.Scheme == "seqd" {
			if u.Host != "" {
				return u.Host
			}
			return u.Opaque
		}
	}
	return c.Subject.CommonName
}

// Allow decides whether a peer of a verified certificate named name may
// talk to this end; nil accepts every name the CA signed.
type Allow func(name string) error

// Prefixes accepts the names that start with one of ps (member-, replayer-).
func Prefixes(ps ...string) Allow {
	return func(name string) error {
		for _, p := range ps {
			if strings.HasPrefix(name, p) {
				return nil
			}
		}
		return fmt.Errorf("%w: %q is not one of %s*", ErrIdentity, name, strings.Join(ps, "*, "))
	}
}

// Names accepts exactly the names ns.
func Names(ns ...string) Allow {
	return func(name string) error {
		for _, n := range ns {
			if name == n {
				return nil
			}
		}
		return fmt.Errorf("%w: %q is not %s", ErrIdentity, name, strings.Join(ns, " or "))
	}
}

func verify(leaf *x509.Certificate, inter [][]byte, pool *x509.CertPool) error {
	opts := x509.VerifyOptions{Roots: pool, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}
	for _, b := range inter {
		if c, err := x509.ParseCertificate(b); err == nil {
			opts.Intermediates.AddCert(c)
		}
	}
	if _, err := leaf.Verify(opts); err != nil {
		var ua x509.UnknownAuthorityError
		if errors.As(err, &ua) {
			return ErrUnknownCA
		}
		return err
	}
	return nil
}

// check verifies a peer's chain to the CA and its name against allow.
func (id *Identity) check(cs tls.ConnectionState, allow Allow) error {
	if len(cs.PeerCertificates) == 0 {
		return ErrNoCertificate
	}
	leaf := cs.PeerCertificates[0]
	var inter [][]byte
	for _, c := range cs.PeerCertificates[1:] {
		inter = append(inter, c.Raw)
	}
	if err := verify(leaf, inter, id.pool); err != nil {
		return fmt.Errorf("certificate %q: %w", NameOf(leaf), err)
	}
	if allow != nil {
		return allow(NameOf(leaf))
	}
	return nil
}

func (id *Identity) base() *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{id.cert},
		// Chains are checked in VerifyConnection against the CA, by
		// identity rather than hostname (a certificate is a process's).
		InsecureSkipVerify: true,
	}
}

// Server is the configuration of a listener: TLS 1.3, a client
// certificate required, chained to the CA and named as allow accepts.
func (id *Identity) Server(allow Allow) *tls.Config {
	c := id.base()
	c.ClientAuth = tls.RequireAnyClientCert
	c.VerifyConnection = func(cs tls.ConnectionState) error { return id.check(cs, allow) }
	return c
}

// AdminServer is the configuration of an admin listener (HTTP, metrics,
// console): TLS 1.3, a client certificate asked for and, when one is
// given, chained to the CA. A caller may come without one: health probes
// (a kubelet, a load balancer) present none, and the admin surface gives
// such a caller nothing but the probes unless it has a token; the roles
// of a certificate's name are the surface's to decide.
func (id *Identity) AdminServer() *tls.Config {
	c := id.base()
	c.ClientAuth = tls.RequestClientCert
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return nil
		}
		return id.check(cs, nil)
	}
	return c
}

// Client is the configuration of a dialler: TLS 1.3, this process's
// certificate offered, the server's chained to the CA and named as allow
// accepts.
func (id *Identity) Client(allow Allow) *tls.Config {
	c := id.base()
	c.VerifyConnection = func(cs tls.ConnectionState) error { return id.check(cs, allow) }
	return c
}

// PeerName is the identity of a handshaken connection's peer ("" when it
// is not TLS or presented no certificate).
func PeerName(c net.Conn) string {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return ""
	}
	cs := tc.ConnectionState()
	if len(cs.PeerCertificates) == 0 {
		return ""
	}
	return NameOf(cs.PeerCertificates[0])
}

// Explain turns a handshake error into one an operator can act on: a
// refusal by the peer (an alert) says the peer refused this process's
// certificate; a failure here says why the peer's was refused.
func Explain(addr string, err error) error {
	if err == nil {
		return nil
	}
	var rec tls.RecordHeaderError
	switch {
	case IsRemoteAlert(err):
		return fmt.Errorf("tls with %s: the peer refused this process's certificate (is it signed by the peer's CA and named as the peer allows?): %w", addr, err)
	case errors.As(err, &rec):
		return fmt.Errorf("tls with %s: the peer does not speak TLS (is TLS on there?): %w", addr, err)
	case errors.Is(err, ErrUnknownCA), errors.Is(err, ErrIdentity), errors.Is(err, ErrNoCertificate):
		return fmt.Errorf("tls with %s: the peer's certificate was refused: %w", addr, err)
	}
	return fmt.Errorf("tls with %s: %w", addr, err)
}

// IsRemoteAlert reports whether err is a TLS alert the peer sent (in TLS
// 1.3 a server's refusal of a client's certificate reaches the client
// only at its first read, as such an alert).
func IsRemoteAlert(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "remote error" {
		return true
	}
	var alert tls.AlertError
	return errors.As(err, &alert)
}

// Dial connects to addr within timeout, over TLS with cfg when cfg is
// set (the handshake within the same timeout; a refusal explained), else
// plain TCP: the dial of the rewind clients.
func Dial(addr string, cfg *tls.Config, timeout time.Duration) (net.Conn, error) {
	if cfg == nil {
		return net.DialTimeout("tcp", addr, timeout)
	}
	d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: cfg}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, Explain(addr, err)
	}
	return c, nil
}
