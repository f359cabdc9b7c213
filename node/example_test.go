package node_test

// This file is the README's "A node in twenty lines", kept here so that
// go vet compiles it: change the two together. main is Example here.

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
)

// Pinger sends the time, waits to see its own message in the stream, and
// sends again three seconds later (examples/pinger).
type Pinger struct{ n *node.Node }

func (p *Pinger) OnMessage(m *node.Message) {
	if !m.Mine() || m.Internal() || p.n.Rewinding() {
		return // not mine: drop it quickly
	}
	fmt.Printf("seq %d at %v: %s\n", m.Seq, time.Unix(0, m.Time).UTC(), m.Payload)
	p.n.SetLocalTimer(1, 3*time.Second) // send again in three seconds
}

func (p *Pinger) OnLocalTimer(id uint64) { p.n.TrySendString("TIME-" + time.Now().String()) }

// Example runs the Pinger beside `seqd sequencer` on the same host (it has
// no Output comment, so go test compiles it and does not run it).
func Example() {
	client, _ := multicast.NewClient(multicast.DefaultConfig())
	p := &Pinger{}
	cfg := node.DefaultConfig()
	cfg.Account = "PINGER"
	p.n, _ = node.New(cfg, p, client)
	p.OnLocalTimer(0) // the first ping
	log.Fatal(p.n.Run(context.Background()))
}
