package tail

import (
	"testing"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/wire"
)

// A message prints as one line, text or JSON, with the keys tools read.
func TestAppendMessage_TextAndJSON(t *testing.T) {
	m := &node.Message{Seq: 7, Epoch: 2, Time: 1_000_000_123, Account: wire.MustAccount("ALICE"), Instance: 1, CmdSeq: 3, Payload: []byte("hi")}
	if got, want := string(AppendMessage(nil, m, false)), "7 00:00:01.000000123 ALICE/1 cmd=3 size=2 crc=f59dd9c2\n"; got != want {
		t.Errorf("text %q, want %q", got, want)
	}
	want := `{"seq":7,"epoch":2,"time":1000000123,"account":"ALICE","instance":1,"cmd_seq":3,"size":2,"crc":4120762818,"internal":false}` + "\n"
	if got := string(AppendMessage(nil, m, true)); got != want {
		t.Errorf("json %q, want %q", got, want)
	}
}
