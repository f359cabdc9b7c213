// Package tlsconf builds the mutual-TLS configurations of seqd's TCP
// paths (the TCP stream and commands, rewind, fetch and seal, bridge
// channels, admin and metrics, Raft) from three PEM files: a process's
// certificate, its key, and the CA that signed every certificate of the
// deployment. Only crypto/tls and crypto/x509.
//
// Identity: a certificate names one process, by a URI SAN seqd://NAME
// (preferred) or by its subject's common name: member-2, replayer-1,
// node-ACCOUNT, bridge-A, admin-alice. Hostnames are not checked (a
// certificate is a process's, not a host's); the chain to the CA is,
// both ways (mutual TLS, TLS 1.3 only), and each server or client may
// restrict which names it accepts (Allow).
//
// Load reads the files once and fails with an error naming the key and
// the file (a missing, unreadable or mismatched file); Server and Client
// build a *tls.Config for each use. Concurrency: an Identity is
// read-only once loaded, safe from any goroutine.
package tlsconf
