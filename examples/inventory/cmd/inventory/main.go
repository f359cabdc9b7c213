// Command inventory runs one process of the inventory service on a seqd
// stream, for drills and by hand:
//
//	inventory service --account INV --instance 1 --db sqlite:inv-1.db --rewind 127.0.0.1:7003 --http 127.0.0.1:8101
//	inventory front   --account FRONT --http 127.0.0.1:8100
//
// service: a Service instance (hot-hot instances share --account) that
// loads its database and rewinds from the flushed seq + 1; its --http
// serves GET /status (JSON: applied seq, digest, flushed seq, active,
// checkpoints). front: the HTTP front (POST /reserve?key=K&qty=N,
// /restock). Transport flags as seqd's: --transport udp|tcp, --tcp.addr
// (comma-separated: a cluster's members), --udp.stream-group,
// --udp.command-group. Each prints "inventory: ready ..." once serving and
// stops on SIGTERM or SIGINT (a service flushes first).
//
//	inventory buyers --url http://127.0.0.1:8100 --buyers 2000 --keys phone
//
// buyers: that many buyers at once, one POST /reserve each; prints
// "buyers: buyers=N won=W refused=R timeouts=T errors=E ..." and exits 1
// if any buyer got no answer from the stream (a timeout or an error).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/seqd/seqd/examples/inventory"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/open"
	"github.com/seqd/seqd/transport/tcp"
)

func main() {
	if len(os.Args) >= 2 && os.Args[1] == "buyers" {
		os.Exit(runBuyers(os.Args[2:]))
	}
	if len(os.Args) < 2 || (os.Args[1] != "service" && os.Args[1] != "front") {
		fmt.Fprintln(os.Stderr, "usage: inventory service|front|buyers [flags] (-h for the flags)")
		os.Exit(2)
	}
	mode := os.Args[1]
	fs := flag.NewFlagSet(mode, flag.ExitOnError)
	kind := fs.String("transport", open.UDP, "udp (multicast) | tcp: as the sequencer's")
	tcpAddr := fs.String("tcp.addr", tcp.DefaultAddr, "the sequencer's TCP address; a cluster's members, comma-separated")
	mc := multicast.DefaultConfig()
	fs.StringVar(&mc.StreamGroup, "udp.stream-group", mc.StreamGroup, "multicast group:port of the stream")
	fs.StringVar(&mc.CommandGroup, "udp.command-group", mc.CommandGroup, "multicast group:port of commands")
	defAccount := "INV"
	if mode == "front" {
		defAccount = "FRONT"
	}
	account := fs.String("account", defAccount, "the node's account (hot-hot instances share it)")
	instance := fs.Uint("instance", 1, "instance id (service)")
	db := fs.String("db", "sqlite:inventory.db", "database: sqlite:PATH or postgres://... (service)")
	rewind := fs.String("rewind", "", "replayers' rewind addresses, comma-separated (service)")
	httpAddr := fs.String("http", "127.0.0.1:0", "HTTP listen address (service: /status; front: /reserve, /restock)")
	session := fs.Uint64("session", 0, "lock onto this session (0: the first seen); the database holds one session's state (service)")
	rewindReplies := fs.Bool("replies-while-rewinding", false, "also send the replies of transactions met while rewinding (a hot-hot pair numbered from the stream; service)")
	replyTimeout := fs.Duration("reply-timeout", 10*time.Second, "longest wait for a reply (front)")
	_ = fs.Parse(os.Args[2:])

	tc := tcp.DefaultConfig()
	addrs := strings.Split(*tcpAddr, ",")
	tc.Addr = addrs[0]
	if len(addrs) > 1 {
		tc.Addrs, tc.ReconnectMax = addrs, open.ClusterReconnectMax
	}
	client, err := open.Client(open.Config{Transport: *kind, Multicast: mc, TCP: tc})
	if err != nil {
		log.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	l, err := net.Listen("tcp", *httpAddr)
	if err != nil {
		log.Fatal(err)
	}
	if mode == "front" {
		err = runFront(ctx, client, *account, *replyTimeout, l)
	} else {
		scfg := inventory.DefaultConfig()
		scfg.RepliesWhileRewinding = *rewindReplies
		err = runService(ctx, client, inventory.InstanceConfig{Account: *account, Instance: uint8(*instance), DB: *db,
			Session: *session, Service: scfg, RewindAddrs: split(*rewind)}, l)
	}
	if err != nil {
		log.Fatalf("inventory %s: %v", mode, err)
	}
}

func split(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

type status struct {
	inventory.Status
	Account     string                 `json:"account"`
	Instance    uint8                  `json:"instance"`
	Active      bool                   `json:"active"`
	Resumed     uint64                 `json:"resumed_after"`
	ReplyErrors uint64                 `json:"reply_errors"`
	Checkpoints []inventory.Checkpoint `json:"checkpoints"`
}

func runService(ctx context.Context, client transport.Client, cfg inventory.InstanceConfig, l net.Listener) error {
	in, err := inventory.StartInstance(ctx, cfg, client)
	if err != nil {
		return err
	}
	resumed := in.Service.Resume()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(status{Status: in.Service.Status(), Account: cfg.Account, Instance: cfg.Instance,
			Active: in.Service.Active(), Resumed: resumed, ReplyErrors: in.Service.ReplyErrors(), Checkpoints: in.Service.Checkpoints()})
	})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(l)
	defer hs.Close()
	fmt.Printf("inventory: ready service account=%s instance=%d http=%s resumed_after=%d\n", cfg.Account, cfg.Instance, l.Addr(), resumed)
	err = in.Run(ctx)
	st := in.Service.Status()
	fmt.Printf("inventory: stopped service applied=%d digest=%016x flushed=%d txns=%d refused=%d\n", st.Applied, st.Digest, st.Flushed, st.Txns, st.Refused)
	return err
}

func runFront(ctx context.Context, client transport.Client, account string, timeout time.Duration, l net.Listener) error {
	defer client.Close()
	f, err := inventory.NewFront(account, timeout)
	if err != nil {
		return err
	}
	cfg := node.DefaultConfig()
	cfg.Account = account
	cfg.BlockWhenFull = true
	cfg.Window = 4096
	n, err := node.New(cfg, f, client)
	if err != nil {
		return err
	}
	f.Attach(n)
	hs := &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second}
	go hs.Serve(l)
	defer hs.Close()
	fmt.Printf("inventory: ready front account=%s http=%s\n", account, l.Addr())
	err = n.Run(ctx)
	st := f.Stats()
	fmt.Printf("inventory: stopped front replies=%d duplicates=%d timeouts=%d\n", st.Replies, st.Duplicates, st.Timeouts)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

func runBuyers(args []string) int {
	fs := flag.NewFlagSet("buyers", flag.ExitOnError)
	urls := fs.String("url", "http://127.0.0.1:8100", "fronts' base URLs, comma-separated")
	n := fs.Int("buyers", 1000, "buyers, each sending one reservation at the same moment")
	keys := fs.String("keys", "phone", "keys to reserve, comma-separated (buyer i takes key i mod count)")
	timeout := fs.Duration("timeout", 30*time.Second, "longest wait for one answer")
	_ = fs.Parse(args)
	rep := inventory.RunBuyers(context.Background(), inventory.BuyersConfig{URLs: split(*urls), Buyers: *n, Keys: split(*keys), Timeout: *timeout})
	fmt.Println("buyers:", rep)
	if rep.Timeouts+rep.Errors > 0 {
		for _, r := range rep.Results {
			if r.Err != "" {
				fmt.Fprintf(os.Stderr, "buyers: buyer %d: %s\n", r.Buyer, r.Err)
				break
			}
		}
		return 1
	}
	return 0
}
