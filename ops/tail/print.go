package tail

import (
	"bufio"
	"hash/crc32"
	"strconv"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/wire"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Tailer is the node.Handler of a live tail: it prints each message
// (AppendMessage) to w, buffered, and closes Done after count of them
// (0: never). Attach it to its node before Run: a local timer of the
// node flushes the buffer, on the node's goroutine (which owns it), so
// that a slow stream still shows up promptly.
type Tailer struct {
	w        *bufio.Writer
	json     bool
	internal bool
	count    int
	seen     int
	buf      []byte
	done     chan struct{}
	n        *node.Node
}

// NewTailer prints to w, as JSON or text, internal messages too when
// internal is set, until count messages (0: no limit).
func NewTailer(w *bufio.Writer, json, internal bool, count int) *Tailer {
	return &Tailer{w: w, json: json, internal: internal, count: count, done: make(chan struct{})}
}

// Done is closed once count messages were printed.
func (t *Tailer) Done() <-chan struct{} { return t.done }

// Attach arms the flush timer on n, the node t is the handler of.
func (t *Tailer) Attach(n *node.Node) {
	t.n = n
	n.SetLocalTimer(tailFlushTimer, tailFlushEvery)
}

const (
	tailFlushTimer = 1
	tailFlushEvery = 100 * time.Millisecond
)

// OnLocalTimer flushes buffered lines and re-arms itself.
func (t *Tailer) OnLocalTimer(id uint64) {
	if id == tailFlushTimer {
		t.w.Flush()
		t.n.SetLocalTimer(tailFlushTimer, tailFlushEvery)
	}
}

// OnMessage prints m.
func (t *Tailer) OnMessage(m *node.Message) {
	if t.seen == t.count && t.count > 0 {
		return
	}
	if m.Internal() && !t.internal {
		return
	}
	t.buf = AppendMessage(t.buf[:0], m, t.json)
	t.w.Write(t.buf)
	t.seen++
	if t.count > 0 && t.seen == t.count {
		close(t.done)
	}
}

// AppendMessage renders one message; the JSON keys are stable so that two
// tails can be compared with standard tools (jq, diff).
func AppendMessage(b []byte, m *node.Message, json bool) []byte {
	crc := crc32.Checksum(m.Payload, castagnoli)
	if json {
		b = append(b, `{"seq":`...)
		b = strconv.AppendUint(b, m.Seq, 10)
		b = append(b, `,"epoch":`...)
		b = strconv.AppendUint(b, uint64(m.Epoch), 10)
		b = append(b, `,"time":`...)
		b = strconv.AppendInt(b, m.Time, 10)
		// An internal record is about a sender (whose incarnation,
		// activation or timer): its account and instance are that
		// sender's, from the payload.
		acct, inst := m.Account, m.Instance
		var in wire.Internal
		internal := m.Internal() && m.DecodeInternal(&in) == nil
		if internal {
			acct, inst = in.Account, in.Instance
		}
		b = append(b, `,"account":`...)
		b = strconv.AppendQuote(b, acct.String())
		b = append(b, `,"instance":`...)
		b = strconv.AppendUint(b, uint64(inst), 10)
		b = append(b, `,"cmd_seq":`...)
		b = strconv.AppendUint(b, m.CmdSeq, 10)
		b = append(b, `,"size":`...)
		b = strconv.AppendInt(b, int64(len(m.Payload)), 10)
		b = append(b, `,"crc":`...)
		b = strconv.AppendUint(b, uint64(crc), 10)
		b = append(b, `,"internal":`...)
		b = strconv.AppendBool(b, m.Internal())
		if internal {
			b = append(b, `,"type":`...)
			b = strconv.AppendQuote(b, in.Type.String())
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
			b = append(b, '/')
			b = strconv.AppendUint(b, uint64(in.Instance), 10)
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
