// Command pinger is the README's node in twenty lines: it sends the time,
// waits to see its own message in the stream, and sends again three
// seconds later. Run it beside `seqd sequencer` (same host, defaults; --transport tcp
// beside `seqd sequencer --transport tcp`).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"time"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/transport/open"
	"github.com/seqd/seqd/transport/tcp"
)

type Pinger struct{ n *node.Node }

func (p *Pinger) OnMessage(m *node.Message) {
	if !m.Mine() || m.Internal() || p.n.Rewinding() {
		return // not mine: drop it quickly
	}
	fmt.Printf("seq %d at %v: %s\n", m.Seq, time.Unix(0, m.Time).UTC(), m.Payload)
	p.n.SetLocalTimer(1, 3*time.Second) // send again in three seconds
}

func (p *Pinger) OnLocalTimer(id uint64) { p.n.TrySendString("TIME-" + time.Now().String()) }

func main() {
	kind := flag.String("transport", open.UDP, "udp (multicast) | tcp: as the sequencer's --transport")
	flag.Parse()
	client, err := open.Client(open.Config{Transport: *kind,
		Multicast: multicast.DefaultConfig(), TCP: tcp.DefaultConfig()})
	if err != nil {
		log.Fatal(err)
	}
	p := &Pinger{}
	cfg := node.DefaultConfig()
	cfg.Account = "PINGER"
	if p.n, err = node.New(cfg, p, client); err != nil {
		log.Fatal(err)
	}
	p.OnLocalTimer(0) // the first ping
	log.Fatal(p.n.Run(context.Background()))
}
