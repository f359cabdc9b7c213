package main

import (
	"crypto/tls"
	"net"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/ops/options"
)

// tlsFlags are the keys of a process's TLS identity (docs/security.md):
// its certificate, its key and the deployment's CA. All three turn mutual
// TLS on for the TCP stream and commands and, in a sequencer cluster, for
// Raft and the peer port.
func tlsFlags() []cli.Flag {
	return []cli.Flag{
		options.String("security.tls-cert", "", "this process's TLS certificate (PEM; identity = URI SAN seqd://NAME or CN: member-ID for a sequencer cluster member); with security.tls-key and security.tls-ca: mutual TLS 1.3 on the TCP stream and commands, Raft, the peer port, rewinds and (unless security.admin-tls=false) the admin endpoint and console; for seqd admin: the caller's certificate (admin-*: operator)"),
		options.String("security.tls-key", "", "the private key of security.tls-cert (PEM)"),
		options.String("security.tls-ca", "", "the CA certificates every peer's certificate must chain to (PEM)"),
	}
}

// tlsConfigOf is the files the flags name.
func tlsConfigOf(c *cli.Context) tlsconf.Config {
	tc := tlsconf.DefaultConfig()
	tc.CertFile, tc.KeyFile, tc.CAFile = c.String("security.tls-cert"), c.String("security.tls-key"), c.String("security.tls-ca")
	return tc
}

var tlsLoaded sync.Map // tlsconf.Config -> *tlsconf.Identity

// tlsIdentity loads the flags' identity (nil when TLS is off); an error
// names the key and the file. Loaded once per set of files.
func tlsIdentity(c *cli.Context) (*tlsconf.Identity, error) {
	tc := tlsConfigOf(c)
	if !tc.Enabled() {
		return nil, nil
	}
	if id, ok := tlsLoaded.Load(tc); ok {
		return id.(*tlsconf.Identity), nil
	}
	id, err := tlsconf.Load(tc)
	if err != nil {
		return nil, err
	}
	tlsLoaded.Store(tc, id)
	return id, nil
}

// rewindTLS is the rewind clients' TLS (nil when TLS is off or the files
// do not load: openClient reports that): a node, tail or tier-2
// replayer rewinds over TLS from replayers that serve it.
func rewindTLS(c *cli.Context) *tls.Config {
	id, err := tlsIdentity(c)
	if err != nil || id == nil {
		return nil
	}
	return id.Client(nil)
}

// tlsListener serves l over TLS when the process has an identity (any
// certificate of the CA may connect).
func tlsListener(c *cli.Context, l net.Listener) (net.Listener, error) {
	id, err := tlsIdentity(c)
	if err != nil || id == nil {
		return l, err
	}
	return tls.NewListener(l, id.Server(nil)), nil
}
