package demo

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/node"
)

// A demo of two sequencers is refused; one sequencer over the lossy
// in-memory network delivers the same stream to every node.
func TestRun_OneSequencerAndABadCount(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Sequencers = 2
	if err := Run(context.Background(), cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("Sequencers 2: %v, want ErrConfig", err)
	}
	cfg = DefaultConfig()
	cfg.Sequencers, cfg.CommandsPerNode = 1, 300
	var out strings.Builder
	cfg.Out = &out
	defer func() { t.Log(out.String()) }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Run(ctx, cfg); err != nil || !strings.Contains(out.String(), "demo: ok ") {
		t.Fatalf("one sequencer: %v", err)
	}
}

// The pair's checker counts a trigger left unanswered as lost, a second
// answer as a dup, an answer naming no trigger as stray, and the runs of
// instances in the order their commands came.
func TestPairCheck_CountsLostDupAndStray(t *testing.T) {
	var k pairCheck
	trig := func(seq uint64) *node.Message {
		return &node.Message{Seq: seq, Account: triggerAccount, CmdSeq: 100 * seq}
	}
	ans := func(seq uint64, inst uint8, of uint64) *node.Message {
		return &node.Message{Seq: seq, Account: pairAccount, Instance: inst, CmdSeq: seq << 16,
			Payload: []byte(pairPrefix + strconv.FormatUint(of, 10))}
	}
	for _, m := range []*node.Message{
		trig(1), {Seq: 2, Account: triggerAccount, CmdSeq: 201}, // not a trigger
		ans(3, 1, 1), trig(4), trig(5), ans(6, 2, 4), ans(7, 2, 4), ans(8, 2, 2),
	} {
		k.observe(m)
	}
	triggers, cmds, lost, dup, stray, runs := k.result()
	if triggers != 3 || cmds != 4 || lost != 1 || dup != 1 || stray != 1 || len(runs) != 2 || runs[0] != 1 || runs[1] != 2 {
		t.Fatalf("triggers=%d cmds=%d lost=%d dup=%d stray=%d runs=%v", triggers, cmds, lost, dup, stray, runs)
	}
}
