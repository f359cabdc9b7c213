package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

var sampleCommands = []Command{
	NewSession{Prev: 7},
	NewSession{Prev: 7, ID: 1_700_000_000_000_000_000},
	BeginEpoch{Epoch: 2, Primary: 3, PrevCut: math.MaxUint64 - 1},
	AddCheckpoint{Epoch: 1, Seq: 42, UnixNano: -5},
	AddMember{member(3, Voter)},
	AddMember{Member{ID: 9, Role: Nonvoter, RaftAddr: strings.Repeat("r", MaxAddrBytes)}},
	RemoveMember{ID: math.MaxUint64},
	SetRole{ID: 4, Role: Voter},
	SealEpoch{Epoch: math.MaxUint64},
	DropCheckpoints{Epoch: 3, Above: math.MaxUint64 - 2},
}

func TestCommand_RoundTrip(t *testing.T) {
	for _, c := range sampleCommands {
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Decode(b)
		if err != nil || got != c {
			t.Fatalf("Decode(Encode(%#v)) = %#v, %v", c, got, err)
		}
		// Every strict prefix and any trailing byte is refused.
		for n := range len(b) {
			if _, err := Decode(b[:n]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%v: prefix of %d bytes: %v", c.Kind(), n, err)
			}
		}
		if _, err := Decode(append(b, 0)); !errors.Is(err, ErrMalformed) {
			t.Fatalf("%v: trailing byte: %v", c.Kind(), err)
		}
	}
}

// TestCommand_Golden pins the wire format: a change here breaks every
// existing log.
func TestCommand_Golden(t *testing.T) {
	b, _ := Encode(BeginEpoch{Epoch: 2, Primary: 3, PrevCut: 0x0102})
	want := []byte{1, 2, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 1, 2}
	if !bytes.Equal(b, want) {
		t.Fatalf("BeginEpoch encodes as %v, want %v", b, want)
	}
}

func TestCommand_DecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"version only", []byte{1}, ErrMalformed},
		{"version 2", []byte{2, 1, 0, 0, 0, 0, 0, 0, 0, 0}, ErrUnknownVersion},
		{"kind 0", []byte{1, 0}, ErrUnknownCommand},
		{"kind 10", []byte{1, 10, 0, 0, 0, 0, 0, 0, 0, 0}, ErrUnknownCommand},
		{"string past end", []byte{1, 4, 0, 0, 0, 0, 0, 0, 0, 1, 1, 200, 'x'}, ErrMalformed},
	}
	for _, tt := range tests {
		if _, err := Decode(tt.b); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := Encode(AddMember{Member{ID: 1, Role: Voter, RaftAddr: strings.Repeat("x", 256)}}); !errors.Is(err, ErrBadMember) {
		t.Fatalf("encode long address: %v", err)
	}
}

// randomCommand returns a command that is often valid in s and sometimes
// not, so random runs exercise both paths.
func randomCommand(rng *rand.Rand, s *State) Command {
	switch rng.IntN(10) {
	case 0:
		if rng.IntN(4) == 0 {
			if rng.IntN(2) == 0 {
				return NewSession{Prev: s.Session(), ID: s.Session() + uint64(rng.IntN(3))}
			}
			return NewSession{Prev: s.Session() + uint64(rng.IntN(2))}
		}
		return AddCheckpoint{Epoch: s.Epoch(), Seq: uint64(rng.IntN(100)), UnixNano: int64(rng.IntN(100))}
	case 1, 2:
		start := s.EpochStart() - 1
		if cp, ok := s.LastCheckpoint(); ok {
			start = max(start, cp.Seq)
		}
		cut := start + uint64(rng.IntN(50))
		if s.Primary() == 0 {
			cut = s.EpochStart() - 1
		}
		if rng.IntN(8) == 0 {
			cut = uint64(rng.IntN(int(start + 2)))
		}
		primary := uint64(1 + rng.IntN(6))
		if ms := s.Members(); len(ms) > 0 && rng.IntN(8) != 0 {
			primary = ms[rng.IntN(len(ms))].ID
		}
		return BeginEpoch{Epoch: s.Epoch() + 1 - uint64(rng.IntN(8)/7), Primary: primary, PrevCut: cut}
	case 3, 4, 5, 6:
		last := max(s.EpochStart(), 1)
		var t int64
		if cp, ok := s.LastCheckpoint(); ok {
			last, t = max(last, cp.Seq+1), cp.UnixNano
		}
		return AddCheckpoint{Epoch: s.Epoch(), Seq: last + uint64(rng.IntN(30)), UnixNano: t + int64(rng.IntN(1000)) - 5}
	case 7, 8:
		id := uint64(1 + rng.IntN(6))
		return AddMember{Member{ID: id, Role: Role(1 + rng.IntN(4)/3), RaftAddr: "127.0.0.1:" + string(rune('0'+rng.IntN(8))), AdminAddr: "a"}}
	case 9:
		if s.Sealed() == s.Epoch() && rng.IntN(2) == 0 {
			above := s.EpochStart() - 1
			if cp, ok := s.LastCheckpoint(); ok && cp.Seq > above {
				above += uint64(rng.IntN(int(cp.Seq - above + 1)))
			}
			return DropCheckpoints{Epoch: s.Epoch() - uint64(rng.IntN(6)/5), Above: above - uint64(rng.IntN(6)/5)}
		}
		if rng.IntN(3) == 0 {
			return SealEpoch{Epoch: s.Epoch() - uint64(rng.IntN(6)/5)}
		}
		if rng.IntN(2) == 0 {
			return SetRole{ID: uint64(1 + rng.IntN(6)), Role: Role(rng.IntN(4))}
		}
		return RemoveMember{ID: uint64(1 + rng.IntN(6))}
	default:
		return RemoveMember{ID: uint64(1 + rng.IntN(6))}
	}
}

// TestSnapshot_RoundTripRandom applies seeded random command sequences,
// through the FSM and its log-entry decoding, and checks after every step
// that the invariants hold and that snapshot + restore gives back an equal
// state (also through raft.FSM's Snapshot/Persist/Restore).
func TestSnapshot_RoundTripRandom(t *testing.T) {
	acceptedKinds := map[Kind]int{}
	for seed := uint64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		f := New()
		accepted := 0
		for i := uint64(1); i <= 400; i++ {
			cmd := randomCommand(rng, f.State())
			data, err := Encode(cmd)
			if err != nil {
				t.Fatal(err)
			}
			resp := f.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: data})
			if _, err := Response(resp); err == nil {
				accepted++
				acceptedKinds[cmd.Kind()]++
			}
			s := f.State()
			if err := s.validate(); err != nil {
				t.Fatalf("seed %d step %d %#v: %v", seed, i, cmd, err)
			}
			got, err := DecodeSnapshot(AppendSnapshot(nil, s))
			if err != nil || !got.Equal(s) {
				t.Fatalf("seed %d step %d: round trip %v -> %v, %v", seed, i, s, got, err)
			}
		}
		if accepted < 50 {
			t.Fatalf("seed %d: only %d of 400 commands accepted: the generator is too weak", seed, accepted)
		}
		var sink memSink
		snap, _ := f.Snapshot()
		if err := snap.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		g := New()
		if err := g.Restore(io.NopCloser(&sink.Buffer)); err != nil {
			t.Fatal(err)
		}
		if !g.State().Equal(f.State()) {
			t.Fatalf("seed %d: restored %v, want %v", seed, g.State(), f.State())
		}
	}
	t.Logf("accepted by kind: %v", acceptedKinds)
	for k := KindNewSession; k <= KindDropCheckpoints; k++ {
		if acceptedKinds[k] < 20 {
			t.Errorf("kind %v accepted %d times: the generator is too weak", k, acceptedKinds[k])
		}
	}
}

func TestSnapshot_DecodeErrors(t *testing.T) {
	s := build(t, running...)
	good := AppendSnapshot(nil, s)
	flip := bytes.Clone(good)
	flip[20] ^= 1
	v3 := bytes.Clone(good)
	v3[5] = 3
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrMalformed},
		{"not a snapshot", []byte("hello world, this is not it"), ErrMalformed},
		{"bit flip", flip, ErrChecksum},
		{"version 3", v3, ErrUnknownVersion},
		{"truncated", good[:len(good)-1], ErrChecksum},
		{"too large", make([]byte, MaxSnapshotBytes+1), ErrSnapshotTooLarge},
		{"huge count", withSum(append(bytes.Clone(good[:6+40]), 0xff, 0xff, 0xff, 0xff)), ErrMalformed},
		// A state Apply could never make: a primary that is no member.
		{"invariant", AppendSnapshot(nil, &State{session: 1, epoch: 1, primary: 5, epochStart: 1}), ErrInvalidState},
		{"epoch start 0", AppendSnapshot(nil, &State{}), ErrInvalidState},
	}
	for _, tt := range tests {
		if _, err := DecodeSnapshot(tt.b); !errors.Is(err, tt.want) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
	}
	// Restore of a bad snapshot keeps the state.
	f := New()
	f.state.Store(s)
	if err := f.Restore(io.NopCloser(bytes.NewReader(flip))); !errors.Is(err, ErrChecksum) {
		t.Fatalf("restore of a corrupt snapshot: %v", err)
	}
	if f.State() != s {
		t.Fatal("a failed restore changed the state")
	}
}

// TestSnapshot_ReadsVersion1 restores a version 1 snapshot (written before
// the sealed epoch was kept) as the same state with nothing sealed, and a
// version 2 one keeps the sealed epoch.
func TestSnapshot_ReadsVersion1(t *testing.T) {
	s := build(t, running...)
	v2 := AppendSnapshot(nil, s)
	// Version 1: the same bytes without the sealed u64, version 1.
	v1 := bytes.Clone(v2[:len(v2)-4-8])
	v1[5] = 1
	v1 = withSum(v1)
	got, err := DecodeSnapshot(v1)
	if err != nil || !got.Equal(s) || got.Sealed() != 0 {
		t.Fatalf("version 1: %v, %v; want %v", got, err, s)
	}
	sealed, err := s.Apply(99, SealEpoch{Epoch: s.Epoch()})
	if err != nil {
		t.Fatal(err)
	}
	got, err = DecodeSnapshot(AppendSnapshot(nil, sealed))
	if err != nil || got.Sealed() != s.Epoch() || !got.Equal(sealed) {
		t.Fatalf("version 2: %v, %v; want sealed %d", got, err, s.Epoch())
	}
}

// withSum appends a valid checksum, so the decoder gets past it.
func withSum(b []byte) []byte {
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func TestFSM_ApplyRejectsNonCommands(t *testing.T) {
	f := New()
	resp := f.Apply(&raft.Log{Index: 3, Type: raft.LogNoop})
	if _, err := Response(resp); !errors.Is(err, ErrNotCommand) {
		t.Fatalf("noop entry: %v", err)
	}
	resp = f.Apply(&raft.Log{Index: 4, Type: raft.LogCommand, Data: []byte{9}})
	if _, err := Response(resp); !errors.Is(err, ErrMalformed) {
		t.Fatalf("garbage entry: %v", err)
	}
	if f.State().AppliedIndex() != 4 {
		t.Fatalf("applied index %d", f.State().AppliedIndex())
	}
	data, _ := Encode(NewSession{})
	s, err := Response(f.Apply(&raft.Log{Index: 5, Type: raft.LogCommand, Data: data}))
	if err != nil || s.Session() != 1 || s != f.State() {
		t.Fatalf("new session: %v %v", s, err)
	}
}

type memSink struct {
	bytes.Buffer
	cancelled bool
}

func (m *memSink) ID() string    { return "mem" }
func (m *memSink) Cancel() error { m.cancelled = true; return nil }
func (m *memSink) Close() error  { return nil }

// TestFSM_ConcurrentReaders reads the state from other goroutines while
// Apply and Restore run (the race detector checks the contract), and checks
// that every state a reader sees is one Apply published: valid, and never
// going back in applied index.
func TestFSM_ConcurrentReaders(t *testing.T) {
	f := New()
	snap := AppendSnapshot(nil, build(t, running...))
	done := make(chan struct{})
	errc := make(chan error, 4)
	for range 4 {
		go func() {
			var last uint64
			for {
				select {
				case <-done:
					errc <- nil
					return
				default:
				}
				s := f.State()
				if err := s.validate(); err != nil {
					errc <- err
					return
				}
				if s.AppliedIndex() < last {
					errc <- errors.New("applied index went back")
					return
				}
				last = s.AppliedIndex()
				_ = s.Members()
				_ = s.Checkpoints()
			}
		}()
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := uint64(1); i <= 2000; i++ {
		if i == 1000 {
			// Restore a snapshot taken at index 8, rebased above what
			// readers saw, as raft does with a newer snapshot.
			s, _ := DecodeSnapshot(snap)
			if err := f.Restore(io.NopCloser(bytes.NewReader(AppendSnapshot(nil, s.withIndex(i))))); err != nil {
				t.Fatal(err)
			}
			continue
		}
		data, _ := Encode(randomCommand(rng, f.State()))
		f.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: data})
	}
	close(done)
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// TestFSM_NotifyNeverBlocksRaft: each Apply and Restore leaves a token on
// the Notify channel; with nobody reading, the tokens coalesce and Apply
// does not block (it runs on Raft's FSM goroutine).
func TestFSM_NotifyNeverBlocksRaft(t *testing.T) {
	f := New()
	ch := make(chan struct{}, 1)
	f.Notify(ch)
	for i, c := range running {
		data, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Response(f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: data})); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case <-ch:
	default:
		t.Fatal("no token after Apply")
	}
	select {
	case <-ch:
		t.Fatal("tokens did not coalesce")
	default:
	}
	snap := AppendSnapshot(nil, f.State())
	g := New()
	g.Notify(ch)
	if err := g.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("no token after Restore")
	}
	if got := g.State().Epoch(); got != 1 {
		t.Fatalf("restored epoch %d, want 1", got)
	}
}
