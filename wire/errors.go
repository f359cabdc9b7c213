package wire

import "errors"

// Sentinel errors returned by decoders. Hot paths compare with errors.Is.
var (
	ErrShort       = errors.New("wire: frame too short")
	ErrMagic       = errors.New("wire: bad magic")
	ErrVersion     = errors.New("wire: unsupported version")
	ErrKind        = errors.New("wire: unexpected frame kind")
	ErrRecord      = errors.New("wire: malformed record")
	ErrTrailing    = errors.New("wire: trailing bytes after last record")
	ErrFragment    = errors.New("wire: fragment out of bounds")
	ErrTooLarge    = errors.New("wire: message larger than MaxMessageBytes")
	ErrNoRoom      = errors.New("wire: buffer too small")
	ErrAccount     = errors.New("wire: account must be 1 to 8 printable ASCII bytes")
	ErrInternal    = errors.New("wire: malformed internal message")
	ErrTimerReq    = errors.New("wire: malformed timer request")
	ErrNakRange    = errors.New("wire: NAK range is empty or reversed")
	ErrZeroSeq     = errors.New("wire: sequence number 0 is not valid")
	ErrControl     = errors.New("wire: malformed control request")
	ErrCountLimit  = errors.New("wire: record count exceeds frame")
	ErrPayloadSize = errors.New("wire: payload exceeds what one record can hold")
	ErrHeader      = errors.New("wire: header length out of bounds")
	ErrFlags       = errors.New("wire: unknown flags")
	ErrStatus      = errors.New("wire: malformed status")
	ErrPeer        = errors.New("wire: malformed peer frame")
	ErrPeerRange   = errors.New("wire: peer fetch range is empty, reversed or from seq 0")

	// Authenticated frames (auth.go).
	ErrUnsigned     = errors.New("wire: frame is not signed")
	ErrKeyUnknown   = errors.New("wire: frame signed with an unknown key id")
	ErrKeyClass     = errors.New("wire: frame signed with a key that may not sign it")
	ErrMAC          = errors.New("wire: frame authentication failed")
	ErrKeyMissing   = errors.New("wire: no key to sign this frame")
	ErrKeyFile      = errors.New("wire: malformed keys file")
	ErrKeyDuplicate = errors.New("wire: duplicate key id")
)
