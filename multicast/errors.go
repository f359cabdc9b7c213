package multicast

import "errors"

// ErrConfig is wrapped by every Config.Validate error.
var ErrConfig = errors.New("multicast: bad config")

// ErrUnknownPeer is returned by SendTo for a Peer this server never heard
// from, or whose sender was evicted from its peer table since (the frame
// is dropped and counted).
var ErrUnknownPeer = errors.New("multicast: unknown peer")

// ErrNoMulticast is returned when the host cannot deliver multicast on the
// configured interface (see doc.go for the host settings).
var ErrNoMulticast = errors.New("multicast: interface does not carry multicast")

// ErrBadSource is returned by Client.AddSource for an address that cannot
// be a repair source, or when the Client has as many as it takes.
var ErrBadSource = errors.New("multicast: bad repair source")
