package main

import (
	"bufio"
	"context"
	"errors"
	"hash/crc32"
	"os"
	"strconv"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/wire"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func tailCommand() *cli.Command {
	flags, before := withConfig(append(transportFlags(false),
		strFlag("format", "text", "text | json (one object per message per line)"),
		intFlag("count", 0, "stop after this many messages (0: until interrupted)"),
		boolFlag("internal", true, "also print internal (sequencer-generated) messages"),
		strFlag("node.mode", "safe", "safe | fast"),
	))
	return &cli.Command{
		Name:   "tail",
		Usage:  "print the event stream (read-only node)",
		Flags:  flags,
		Before: before,
		Action: runTail,
	}
}

type tailer struct {
	w        *bufio.Writer
	json     bool
	internal bool
	count    int
	seen     int
	buf      []byte
	done     chan struct{}
	n        *node.Node
}

const (
	tailFlushTimer = 1
	tailFlushEvery = 100 * time.Millisecond
)

// OnLocalTimer flushes buffered lines and re-arms itself.
func (t *tailer) OnLocalTimer(id uint64) {
	if id == tailFlushTimer {
		t.w.Flush()
		t.n.SetLocalTimer(tailFlushTimer, tailFlushEvery)
	}
}

func (t *tailer) OnMessage(m *node.Message) {
	if t.seen == t.count && t.count > 0 {
		return
	}
	if m.Internal() && !t.internal {
		return
	}
	t.buf = appendMessage(t.buf[:0], m, t.json)
	t.w.Write(t.buf)
	t.seen++
	if t.count > 0 && t.seen == t.count {
		close(t.done)
	}
}

// appendMessage renders one message; the JSON keys are stable so that two
// tails can be compared with standard tools (jq, diff).
func appendMessage(b []byte, m *node.Message, json bool) []byte {
	crc := crc32.Checksum(m.Payload, castagnoli)
	if json {
		b = append(b, `{"seq":`...)
		b = strconv.AppendUint(b, m.Seq, 10)
		b = append(b, `,"epoch":`...)
		b = strconv.AppendUint(b, uint64(m.Epoch), 10)
		b = append(b, `,"time":`...)
		b = strconv.AppendInt(b, m.Time, 10)
		b = append(b, `,"account":`...)
		b = strconv.AppendQuote(b, m.Account.String())
		b = append(b, `,"instance":`...)
		b = strconv.AppendUint(b, uint64(m.Instance), 10)
		b = append(b, `,"cmd_seq":`...)
		b = strconv.AppendUint(b, m.CmdSeq, 10)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, int64(len(m.Payload)), 10)
		b = append(b, `,"crc":`...)
		b = strconv.AppendUint(b, uint64(crc), 10)
		b = append(b, `,"internal":`...)
		b = strconv.AppendBool(b, m.Internal())
		if m.Internal() {
			var in wire.Internal
			if m.DecodeInternal(&in) == nil {
				b = append(b, `,"type":`...)
				b = strconv.AppendQuote(b, in.Type.String())
			}
		}
		return append(b, "}\n"...)
	}
	b = strconv.AppendUint(b, m.Seq, 10)
	b = append(b, ' ')
	b = time.Unix(0, m.Time).UTC().AppendFormat(b, "15:04:05.000000000")
	b = append(b, ' ')
	if m.Internal() {
		var in wire.Internal
		if m.DecodeInternal(&in) == nil {
			b = append(b, "internal "...)
			b = append(b, in.Type.String()...)
			b = append(b, ' ')
			b = append(b, in.Account.String()...)
			return append(b, '\n')
		}
	}
	b = append(b, m.Account.String()...)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(m.Instance), 10)
	b = append(b, " cmd="...)
	b = strconv.AppendUint(b, m.CmdSeq, 10)
	b = append(b, " size="...)
	b = strconv.AppendInt(b, int64(len(m.Payload)), 10)
	b = append(b, " crc="...)
	b = strconv.AppendUint(b, uint64(crc), 16)
	return append(b, '\n')
}

func runTail(cc *cli.Context) error {
	log := newLogger(cc)
	format := cc.String("format")
	if err := oneOf("format", format, "text", "json"); err != nil {
		return err
	}
	mode := cc.String("node.mode")
	if err := oneOf("node.mode", mode, "safe", "fast"); err != nil {
		return err
	}
	cfg := node.DefaultConfig()
	cfg.ReadOnly = true
	if mode == "fast" {
		cfg.Mode = node.Fast
	}
	client, err := openClient(cc, log, "tail")
	if err != nil {
		return err
	}
	defer client.Close()
	t := &tailer{w: bufio.NewWriterSize(os.Stdout, 1<<16), json: format == "json", internal: cc.Bool("internal"), count: cc.Int("count"), done: make(chan struct{})}
	defer t.w.Flush()
	n, err := node.New(cfg, t, client)
	if err != nil {
		return configError(err, nodeKeys)
	}
	// Done on SIGTERM or SIGINT, even one sent during start-up: the tail
	// then ends with status 0 like one stopped while printing.
	ctx, cancel := context.WithCancel(cc.Context)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- n.Run(ctx) }()
	// The writer belongs to the node's goroutine; a local timer flushes it
	// there so that a slow stream still shows up promptly.
	t.n = n
	n.SetLocalTimer(tailFlushTimer, tailFlushEvery)
	for {
		select {
		case <-t.done:
			cancel()
			<-errc
			return nil
		case err := <-errc:
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		}
	}
}
