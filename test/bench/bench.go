package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/seqd/seqd/cluster"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/wire"
)

// Config is one run of the bench: `seqd bench`'s flags, field by field.
type Config struct {
	// Transport is mem, udp or tcp (the flag --transport).
	Transport string
	// Mode is tput, rtt, baseline, rewind or idle (--mode).
	Mode string
	// IdleFor is how long --mode idle measures the processes (--idle-for).
	IdleFor time.Duration
	// SizeBytes is the payload of each message (--size).
	SizeBytes int
	// Nodes is the count of sending nodes (--nodes).
	Nodes int
	// Count is the messages in all (--count).
	Count int
	// Batch lets nodes put several commands in one frame (--batch); the
	// sequencer always batches.
	Batch bool
	// Spin is how long processes poll without blocking after each frame
	// (--spin: sequencer.idle-spin, node.idle-spin).
	Spin time.Duration
	// OutDir receives the latency histograms (CSV and PNG) when not empty
	// (--out).
	OutDir string
	// Sequencers is 1, or 3: a Raft group of three `seqd sequencer
	// --cluster` processes measured against a single one (--sequencers).
	Sequencers int
	// Timeouts is the group members' raft timing profile with
	// Sequencers 3: lan, wan or test (--timeouts).
	Timeouts string
	// Delivery is the nodes' delivery mode, safe or fast (--delivery).
	Delivery string
	// Faults are seeded faults (transport/fault syntax) on the UDP channel
	// of --mode bridge, at its receiving end (--faults); "": none.
	Faults string
	// Auth runs every process with authenticated frames (--auth): keys
	// drawn for the run (a stream key, a shared command key, a member
	// key) in a temporary directory.
	Auth bool
	// TLS is off, on (every process of a tcp run holds a certificate of
	// a throwaway CA: mutual TLS on the stream and commands) or compare
	// (the run without, then with, and the ratios) (--tls).
	TLS string

	// Exe is the seqd binary the bench starts its processes from (`seqd
	// sequencer`, `seqd node`, `seqd bench-peer`...); empty: this
	// process's own executable.
	Exe string
	// Out receives the result lines; nil: os.Stdout.
	Out io.Writer
}

// DefaultConfig is `seqd bench` with no flags.
func DefaultConfig() Config {
	return Config{
		Transport:  "mem",
		Mode:       "tput",
		IdleFor:    20 * time.Second,
		SizeBytes:  256,
		Nodes:      3,
		Count:      3_000_000,
		Sequencers: 1,
		Timeouts:   "lan",
		Delivery:   "safe",
	}
}

// Validate names the flag at fault and its allowed values.
func (o Config) Validate() error {
	switch {
	case o.SizeBytes < 1 || o.SizeBytes > wire.MaxMessageBytes:
		return fmt.Errorf("bench: --size %d out of range (1..%d)", o.SizeBytes, wire.MaxMessageBytes)
	case o.Nodes < 1 || o.Nodes > 64:
		return fmt.Errorf("bench: --nodes %d out of range (1..64)", o.Nodes)
	case o.Count < o.Nodes:
		return fmt.Errorf("bench: --count %d must be at least --nodes", o.Count)
	}
	if o.Faults != "" {
		if o.Mode != "bridge" {
			return fmt.Errorf("bench: --faults is for --mode bridge (the bridge's UDP channel)")
		}
		if _, err := fault.Parse(o.Faults); err != nil {
			return fmt.Errorf("bench: --faults %q: %w", o.Faults, err)
		}
	}
	switch o.Mode {
	case "tput", "rtt", "baseline", "rewind", "bridge":
	case "idle":
		if o.IdleFor <= 0 {
			return fmt.Errorf("bench: --idle-for %v must be positive", o.IdleFor)
		}
	default:
		return fmt.Errorf("bench: --mode %q (want tput, rtt, baseline, rewind, idle or bridge)", o.Mode)
	}
	switch {
	case o.Sequencers != 1 && o.Sequencers != 3:
		return fmt.Errorf("bench: --sequencers %d (want 1 or 3)", o.Sequencers)
	case o.Delivery != "safe" && o.Delivery != "fast":
		return fmt.Errorf("bench: --delivery %q (want safe or fast)", o.Delivery)
	case o.Sequencers == 3 && (o.Transport != "udp" || (o.Mode != "tput" && o.Mode != "rtt" && o.Mode != "idle")):
		return fmt.Errorf("bench: --sequencers 3 runs with --transport udp and --mode tput, rtt or idle (a cluster's stream is udp multicast)")
	case o.TLS != "" && o.TLS != "off" && o.TLS != "on" && o.TLS != "compare":
		return fmt.Errorf("bench: --tls %q (want off, on or compare)", o.TLS)
	case o.TLS != "" && o.TLS != "off" && (o.Transport != "tcp" || (o.Mode != "tput" && o.Mode != "rtt") || o.Sequencers != 1):
		return fmt.Errorf("bench: --tls %s runs with --transport tcp, --mode tput or rtt and one sequencer", o.TLS)
	case o.Sequencers == 3 && cluster.Profiles[o.Timeouts] == nil:
		return fmt.Errorf("bench: --timeouts %q (want lan, wan or test)", o.Timeouts)
	}
	return nil
}

// Run validates cfg, runs the bench it describes and writes its result
// lines to cfg.Out. It returns when the bench is done or failed, or
// soon after ctx ends (its processes killed).
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	if cfg.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("bench: the seqd binary to start: %w", err)
		}
		cfg.Exe = exe
	}
	if cfg.Mode == "baseline" {
		return runBaseline(ctx, cfg)
	}
	if cfg.Mode == "bridge" {
		return benchBridge(ctx, cfg)
	}
	switch cfg.Transport {
	case "mem":
		if cfg.Mode != "tput" {
			return fmt.Errorf("bench: --mode %s needs a real transport (udp or tcp)", cfg.Mode)
		}
		return benchMem(cfg)
	case "udp", "tcp":
		return benchProcesses(ctx, cfg, cfg.OutDir)
	}
	return fmt.Errorf("bench: --transport %q not supported yet (want mem, udp or tcp)", cfg.Transport)
}
