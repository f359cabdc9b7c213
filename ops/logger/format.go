package logger

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/ops/tail"
	"github.com/seqd/seqd/wire"
)

// AppendLine renders m as one line of format f, with at most maxPayload
// payload bytes shown.
func AppendLine(b []byte, m *node.Message, f Format, maxPayload int) []byte {
	p := m.Payload
	cut := false
	if len(p) > maxPayload {
		p, cut = p[:maxPayload], true
	}
	if f == JSON {
		b = tail.AppendMessage(b, m, true)
		b = b[:len(b)-2] // "}\n"
		if !m.Internal() && maxPayload > 0 {
			if utf8.Valid(p) {
				b = append(b, `,"payload":`...)
				b = appendJSONString(b, p)
			} else {
				b = append(b, `,"payload_hex":"`...)
				b = appendHex(b, p)
				b = append(b, '"')
			}
			if cut {
				b = append(b, `,"truncated":true`...)
			}
		}
		return append(b, "}\n"...)
	}
	b = time.Unix(0, m.Time).UTC().AppendFormat(b, "2006-01-02T15:04:05.000000000Z")
	b = append(b, " seq="...)
	b = strconv.AppendUint(b, m.Seq, 10)
	b = append(b, " epoch="...)
	b = strconv.AppendUint(b, uint64(m.Epoch), 10)
	var in wire.Internal
	if m.Internal() && m.DecodeInternal(&in) == nil {
		b = append(b, " internal="...)
		b = append(b, in.Type.String()...)
		if in.Account != 0 {
			b = append(b, " about="...)
			b = append(b, in.Account.String()...)
			b = append(b, '/')
			b = strconv.AppendUint(b, uint64(in.Instance), 10)
		}
		return append(b, '\n')
	}
	b = append(b, " from="...)
	b = append(b, m.Account.String()...)
	b = append(b, '/')
	b = strconv.AppendUint(b, uint64(m.Instance), 10)
	b = append(b, " cmd="...)
	b = strconv.AppendUint(b, m.CmdSeq, 10)
	b = append(b, " size="...)
	b = strconv.AppendInt(b, int64(len(m.Payload)), 10)
	if maxPayload > 0 {
		b = append(b, ' ')
		b = strconv.AppendQuoteToASCII(b, string(p))
		if cut {
			b = append(b, "..."...)
		}
	}
	return append(b, '\n')
}

// appendJSONString appends p, valid UTF-8, as a JSON string.
func appendJSONString(b, p []byte) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for _, c := range p {
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

func appendHex(b, p []byte) []byte {
	const hex = "0123456789abcdef"
	for _, c := range p {
		b = append(b, hex[c>>4], hex[c&15])
	}
	return b
}
