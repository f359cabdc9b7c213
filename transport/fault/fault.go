// Package fault injects seeded loss, duplication and reordering at a
// transport's edge, for tests and for operators' chaos drills. The same
// seed and the same sequence of frames give the same decisions, so a
// failure replays.
//
// An Injector is used by one goroutine at a time (the endpoint's).
package fault

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
)

// EnvVar is the environment variable every seqd process reads at start,
// e.g. SEQD_FAULTS=loss=0.05,dup=0.01,reorder=0.01,seed=7.
const EnvVar = "SEQD_FAULTS"

// ErrSpec is wrapped by Parse errors.
var ErrSpec = errors.New("fault: bad spec")

// Config gives the probability of each fault per frame.
type Config struct {
	Loss    float64 // frame is dropped
	Dup     float64 // frame is delivered twice
	Reorder float64 // frame is held back and delivered after the next one
	Seed    uint64
}

// Enabled reports whether any fault has a non-zero probability.
func (c Config) Enabled() bool { return c.Loss > 0 || c.Dup > 0 || c.Reorder > 0 }

// String renders c in the form Parse reads.
func (c Config) String() string {
	return fmt.Sprintf("loss=%g,dup=%g,reorder=%g,seed=%d", c.Loss, c.Dup, c.Reorder, c.Seed)
}

// Validate checks that every probability lies in [0, 1).
func (c Config) Validate() error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss", c.Loss}, {"dup", c.Dup}, {"reorder", c.Reorder}} {
		if !(p.v >= 0 && p.v < 1) {
			return fmt.Errorf("%w: %s=%g, want a probability in [0, 1)", ErrSpec, p.name, p.v)
		}
	}
	return nil
}

// Parse reads a spec such as "loss=0.05,dup=0.01,reorder=0.01,seed=7". An
// empty spec is no faults. Unknown keys are errors.
func Parse(spec string) (Config, error) {
	var c Config
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return c, nil
	}
	for _, kv := range strings.Split(spec, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok {
			return c, fmt.Errorf("%w: %q is not key=value (keys: loss, dup, reorder, seed)", ErrSpec, kv)
		}
		var err error
		switch k {
		case "loss":
			c.Loss, err = strconv.ParseFloat(v, 64)
		case "dup":
			c.Dup, err = strconv.ParseFloat(v, 64)
		case "reorder":
			c.Reorder, err = strconv.ParseFloat(v, 64)
		case "seed":
			c.Seed, err = strconv.ParseUint(v, 10, 64)
		default:
			return c, fmt.Errorf("%w: unknown key %q (keys: loss, dup, reorder, seed)", ErrSpec, k)
		}
		if err != nil {
			return c, fmt.Errorf("%w: %s=%q: %v", ErrSpec, k, v, err)
		}
	}
	return c, c.Validate()
}

// FromEnv parses $SEQD_FAULTS. It returns the zero Config when unset.
func FromEnv() (Config, error) { return Parse(os.Getenv(EnvVar)) }

// Counters are what an Injector did.
type Counters struct {
	Passed, Dropped, Duplicated, Reordered uint64
}

// Injector applies a Config to a stream of frames.
type Injector struct {
	cfg     Config
	rng     *rand.Rand
	held    []byte
	hasHeld bool
	c       Counters
}

// maxHeld is the largest frame the injector can hold back for reordering;
// larger frames pass in order.
const maxHeld = 1 << 16

// New returns an Injector; stream distinguishes injectors that share a seed
// (for example one per endpoint) so that their decisions differ.
func New(cfg Config, stream uint64) *Injector {
	return &Injector{
		cfg:  cfg,
		rng:  rand.New(rand.NewPCG(cfg.Seed, stream^0x9e3779b97f4a7c15)),
		held: make([]byte, 0, maxHeld),
	}
}

// Config returns the injector's configuration.
func (in *Injector) Config() Config { return in.cfg }

// Counters returns what the injector did so far.
func (in *Injector) Counters() Counters { return in.c }

// Pass runs frame through the faults and calls out zero, one or more
// times: not at all for a loss, twice for a duplicate, and with a frame
// held back earlier after this one for a reorder. out must not retain the
// slice. Pass allocates nothing.
func (in *Injector) Pass(frame []byte, out func([]byte)) {
	if in.cfg.Loss > 0 && in.rng.Float64() < in.cfg.Loss {
		in.c.Dropped++
		return
	}
	if in.cfg.Reorder > 0 && !in.hasHeld && len(frame) <= maxHeld && in.rng.Float64() < in.cfg.Reorder {
		in.held = append(in.held[:0], frame...)
		in.hasHeld = true
		in.c.Reordered++
		return
	}
	in.c.Passed++
	out(frame)
	if in.cfg.Dup > 0 && in.rng.Float64() < in.cfg.Dup {
		in.c.Duplicated++
		out(frame)
	}
	in.Release(out)
}

// Release delivers a held-back frame, if any. Endpoints call it when they
// go idle so that a reordered frame is late, not lost.
func (in *Injector) Release(out func([]byte)) {
	if in.hasHeld {
		in.hasHeld = false
		in.c.Passed++
		out(in.held)
	}
}
