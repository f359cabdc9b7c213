package tlsconf

import "errors"

var (
	// ErrConfig: a Config whose files are missing or do not belong
	// together.
	ErrConfig = errors.New("tlsconf: configuration")
	// ErrIdentity: a peer's certificate is valid but names a process
	// this end does not accept.
	ErrIdentity = errors.New("tlsconf: peer identity refused")
	// ErrNoCertificate: a peer presented no certificate.
	ErrNoCertificate = errors.New("tlsconf: peer presented no certificate")
	// ErrUnknownCA: a peer's certificate does not chain to the CA.
	ErrUnknownCA = errors.New("tlsconf: peer certificate not signed by the configured CA")
)
