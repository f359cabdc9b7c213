package multicast

import "errors"

// ErrConfig is wrapped by every Config.Validate error.
var ErrConfig = errors.New("multicast: bad config")

// ErrUnknownPeer is returned by SendTo for a Peer this server never heard
// from (or that was evicted from its peer table).
var ErrUnknownPeer = errors.New("multicast: unknown peer")

// ErrNoMulticast is returned when the host cannot deliver multicast on the
// configured interface (see doc.go for the host settings).
var ErrNoMulticast = errors.New("multicast: interface does not carry multicast")

// ErrSend is wrapped by Flush (and by a Publish, SendTo or Send that had to
// flush) when the kernel refused a datagram; the other datagrams of the
// batch were still sent. Callers may treat it as loss.
var ErrSend = errors.New("multicast: send failed")

// sendError wraps the kernel's refusal; errors.Is(err, ErrSend) holds.
type sendError struct{ err error }

func (e sendError) Error() string        { return ErrSend.Error() + ": " + e.err.Error() }
func (e sendError) Is(target error) bool { return target == ErrSend }
func (e sendError) Unwrap() error        { return e.err }
