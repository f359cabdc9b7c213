package tiered

import (
	"encoding/binary"
	"fmt"
	"unicode/utf8"
)

// Role is what a member does in the seqd cluster.
type Role uint8

const (
	RoleReplayer  Role = 1 // persists the stream, answers NAKs and rewinds
	RoleSequencer Role = 2 // a sequencer group member
	RoleNode      Role = 3 // an application node (or tail)
	RoleBridge    Role = 4 // a bridge end (Meta version 4)
	maxRole            = RoleBridge
)

func (r Role) String() string {
	switch r {
	case RoleReplayer:
		return "replayer"
	case RoleSequencer:
		return "sequencer"
	case RoleNode:
		return "node"
	case RoleBridge:
		return "bridge"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole reads a role name.
func ParseRole(s string) (Role, error) {
	for r := RoleReplayer; r <= maxRole; r++ {
		if r.String() == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("%w: role %q (want replayer, sequencer, node or bridge)", ErrConfig, s)
}

// Meta is what a member announces in gossip (memberlist node meta): who
// it is and, for a replayer, what it can serve and how busy it is.
type Meta struct {
	Name       string // the member's name (unique in the cluster)
	Role       Role
	NAKAddr    string // host:port answering NAKs ("" if none)
	RewindAddr string // host:port serving rewinds over TCP ("" if none)
	// Tier: 1 follows the stream itself; 2 follows a tier-1 replayer.
	// Lower tiers are preferred. 0 for non-replayers.
	Tier    uint8
	Session uint64
	// Lowest and Highest are the first and last seq held (0, 0: none).
	Lowest  uint64
	Highest uint64
	// Load is the member's own measure of how busy it is (a replayer:
	// rewinds in progress); lower is preferred.
	Load uint32
	// AdminAddr is the member's admin endpoint (HTTP: status, the status
	// page), "" if none: how `seqd admin-node` finds a deployment's
	// sequencer members. Encoding version 2.
	AdminAddr string
	// A node (version 3): its account and instance ("" and 0 when it has
	// none), whether it is the active instance of its hot-hot account,
	// and the last seq it applied.
	Account  string
	Instance uint8
	Active   bool
	Applied  uint64
	// Pair (version 4) names a pair of bridge ends that stand in for one
	// another ("" for none): of the live members announcing the same
	// Pair, the one with Active set serves, the others are warm standbys.
	Pair string
}

// Encoding limits. A Meta rides in every memberlist alive message, whose
// meta is at most 512 bytes (memberlist.MetaMaxSize).
const (
	// MetaVersion is the encoding this package writes.
	MetaVersion = 4
	// MaxMetaBytes bounds an encoded Meta (memberlist.MetaMaxSize).
	MaxMetaBytes = 512
	// MaxNameBytes and MaxAddrBytes bound the string fields.
	MaxNameBytes = 128
	MaxAddrBytes = 128
	// maxAccountBytes is a seqd account's longest name.
	maxAccountBytes = 8
)

// The encoding, version 1 (little-endian varints, as encoding/binary's
// Uvarint):
//
//	version  byte   1
//	role     byte   1..3
//	tier     byte
//	session  uvarint
//	lowest   uvarint
//	highest  uvarint  (>= lowest)
//	load     uvarint  (<= 2^32-1)
//	name     uvarint length (1..MaxNameBytes), UTF-8 bytes
//	nak      uvarint length (0..MaxAddrBytes), bytes
//	rewind   uvarint length (0..MaxAddrBytes), bytes
//
// Version 2 appends:
//
//	admin    uvarint length (0..MaxAddrBytes), bytes
//
// Version 3 appends a node's fields:
//
//	account  uvarint length (0..8), bytes
//	instance byte
//	active   byte     0 or 1
//	applied  uvarint
//
// Version 4 appends:
//
//	pair     uvarint length (0..MaxNameBytes), bytes
//
// Versioning: a later version only appends fields after these and bumps
// the version byte, so a reader of version 1 reads the fields it knows
// from any version >= 1 and ignores the rest (members of mixed versions
// still find each other during a rolling upgrade). A change that an
// older reader would misread takes a new encoding, not a new version.

// AppendMeta appends the encoding of m to b; it fails (ErrMetaTooLarge,
// ErrMeta) on a Meta that Decode would refuse.
func AppendMeta(b []byte, m *Meta) ([]byte, error) {
	if err := m.check(); err != nil {
		return b, err
	}
	start := len(b)
	b = append(b, MetaVersion, byte(m.Role), m.Tier)
	b = binary.AppendUvarint(b, m.Session)
	b = binary.AppendUvarint(b, m.Lowest)
	b = binary.AppendUvarint(b, m.Highest)
	b = binary.AppendUvarint(b, uint64(m.Load))
	for _, s := range [...]string{m.Name, m.NAKAddr, m.RewindAddr, m.AdminAddr, m.Account} {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	active := byte(0)
	if m.Active {
		active = 1
	}
	b = append(b, m.Instance, active)
	b = binary.AppendUvarint(b, m.Applied)
	b = binary.AppendUvarint(b, uint64(len(m.Pair)))
	b = append(b, m.Pair...)
	if len(b)-start > MaxMetaBytes {
		return b[:start], fmt.Errorf("%w: %d bytes encoded, at most %d", ErrMetaTooLarge, len(b)-start, MaxMetaBytes)
	}
	return b, nil
}

// check validates the fields an encoding carries.
func (m *Meta) check() error {
	switch {
	case m.Role < RoleReplayer || m.Role > maxRole:
		return fmt.Errorf("%w: role %d", ErrMeta, m.Role)
	case len(m.Name) == 0 || len(m.Name) > MaxNameBytes || !utf8.ValidString(m.Name):
		return fmt.Errorf("%w: name of %d bytes (want 1..%d of UTF-8)", ErrMetaTooLarge, len(m.Name), MaxNameBytes)
	case len(m.Pair) > MaxNameBytes || !utf8.ValidString(m.Pair):
		return fmt.Errorf("%w: a pair name of %d bytes (at most %d of UTF-8)", ErrMetaTooLarge, len(m.Pair), MaxNameBytes)
	case len(m.Account) > maxAccountBytes:
		return fmt.Errorf("%w: an account of %d bytes (at most %d)", ErrMetaTooLarge, len(m.Account), maxAccountBytes)
	case len(m.NAKAddr) > MaxAddrBytes || len(m.RewindAddr) > MaxAddrBytes || len(m.AdminAddr) > MaxAddrBytes:
		return fmt.Errorf("%w: an address longer than %d bytes", ErrMetaTooLarge, MaxAddrBytes)
	case m.Lowest > m.Highest:
		return fmt.Errorf("%w: lowest seq %d above highest %d", ErrMeta, m.Lowest, m.Highest)
	}
	return nil
}

// DecodeMeta decodes gossip meta bytes (untrusted: any peer can send
// anything) into m. It never panics and reads nothing outside b; the
// strings are copies.
func DecodeMeta(b []byte, m *Meta) error {
	if len(b) > MaxMetaBytes {
		return fmt.Errorf("%w: %d bytes", ErrMetaTooLarge, len(b))
	}
	if len(b) < 3 {
		return fmt.Errorf("%w: %d bytes, shorter than a header", ErrMeta, len(b))
	}
	if b[0] == 0 {
		return ErrMetaVersion
	}
	d := metaDecoder{b: b[3:]}
	*m = Meta{Role: Role(b[1]), Tier: b[2]}
	m.Session = d.uvarint()
	m.Lowest = d.uvarint()
	m.Highest = d.uvarint()
	load := d.uvarint()
	m.Name = d.str(MaxNameBytes)
	m.NAKAddr = d.str(MaxAddrBytes)
	m.RewindAddr = d.str(MaxAddrBytes)
	if b[0] >= 2 {
		m.AdminAddr = d.str(MaxAddrBytes)
	}
	if b[0] >= 3 {
		m.Account = d.str(maxAccountBytes)
		m.Instance = d.byte()
		switch d.byte() {
		case 0:
		case 1:
			m.Active = true
		default:
			if d.err == nil {
				d.err = fmt.Errorf("%w: active flag not 0 or 1", ErrMeta)
			}
		}
		m.Applied = d.uvarint()
	}
	if b[0] >= 4 {
		m.Pair = d.str(MaxNameBytes)
	}
	if d.err != nil {
		return d.err
	}
	if load > 1<<32-1 {
		return fmt.Errorf("%w: load %d", ErrMeta, load)
	}
	m.Load = uint32(load)
	if b[0] <= MetaVersion && len(d.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last field", ErrMeta, len(d.b))
	}
	return m.check()
}

type metaDecoder struct {
	b   []byte
	err error
}

func (d *metaDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err = fmt.Errorf("%w: truncated or overlong number", ErrMeta)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *metaDecoder) byte() uint8 {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.err = fmt.Errorf("%w: truncated", ErrMeta)
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *metaDecoder) str(limit int) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(limit) || n > uint64(len(d.b)) {
		d.err = fmt.Errorf("%w: a string of %d bytes (limit %d, %d left)", ErrMeta, n, limit, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// PairStepBack reports whether the active bridge end self, of pair,
// should step back to standby: another live member announces pair as
// active too and comes first by name (the one PairTakeover picks among
// standbys). Two ends are active after a false death (a partition that
// healed, a paused process): the far end drops the copies by seq, but
// its site would get every packet twice and the origin every command
// twice. Both ends see the same names, so exactly one steps back.
func PairStepBack(ms []Member, pair, self string) bool {
	for _, m := range ms {
		if m.Err == nil && m.Meta.Role == RoleBridge && m.Meta.Pair == pair && m.Name != self && m.Meta.Active && m.Name < self {
			return true
		}
	}
	return false
}

// PairTakeover reports whether the bridge end self, of pair, should take
// over: no live member announces pair as active, and self has the lowest
// name among the live standbys of the pair (so that two standbys that
// lose their active end at once, or start together, do not both take
// over; if they did, the far end would drop the copies by seq). ms are
// the live members as gossip shows them, self included or not.
func PairTakeover(ms []Member, pair, self string) bool {
	for _, m := range ms {
		if m.Err != nil || m.Meta.Role != RoleBridge || m.Meta.Pair != pair || m.Name == self {
			continue
		}
		if m.Meta.Active || m.Name < self {
			return false
		}
	}
	return true
}
