package tcp

import "errors"

// Sentinel errors of package tcp. Callers test them with errors.Is.
var (
	// ErrConfig is wrapped by Config.Validate errors, which name the field.
	ErrConfig = errors.New("tcp: bad config")
	// ErrOversizedFrame is why a connection whose peer announced a frame
	// longer than MaxFrameBytes was closed.
	ErrOversizedFrame = errors.New("tcp: received frame length exceeds MaxFrameBytes")
	// ErrSlowClient is why a connection whose peer did not read was
	// closed: its send queue stayed above SlowClientBytes for
	// SlowClientTimeout with no progress, or grew beyond MaxQueueBytes.
	ErrSlowClient = errors.New("tcp: peer does not read (send queue above SlowClientBytes with no progress, or above MaxQueueBytes)")
	// ErrTooManyConns is why a connection accepted beyond
	// Config.MaxConns was closed at once.
	ErrTooManyConns = errors.New("tcp: too many connections (MaxConns)")
	// ErrBadSource is returned by Client.AddSource for an address that
	// is not host:port, or beyond the sources a client takes.
	ErrBadSource = errors.New("tcp: bad repair source")
	// ErrUnknownPeer is returned by Client.SendTo for a Peer AddSource
	// did not return.
	ErrUnknownPeer = errors.New("tcp: unknown peer")
	// ErrDisconnected is why a connection closed by Server.Disconnect
	// ended.
	ErrDisconnected = errors.New("tcp: disconnected by the server")
	// ErrHandshake is why a connection whose TLS handshake failed was
	// closed (Config.TLS): the error wrapped says why (tlsconf.Explain).
	ErrHandshake = errors.New("tcp: TLS handshake")
	// ErrAuth is why a connection that delivered a frame failing
	// authentication (Config.Auth) was closed; the error wrapped says
	// why (wire.ErrMAC, wire.ErrUnsigned...).
	ErrAuth = errors.New("tcp: received frame failed authentication")
)
