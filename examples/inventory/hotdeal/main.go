// Command hotdeal is the seeds' Arcturus hot deal on seqd: ten 1đ phones
// and thousands of buyers at once. It runs, in one process, a sequencer
// and a replayer on loopback TCP, a hot-hot pair of inventory instances
// (each with its SQLite database), an HTTP front, and the buyers, each
// sending one POST /reserve; then checks that nothing was oversold, that
// every buyer got exactly one answer, and that the winners are the orders
// in both databases. The last lines sum it up.
//
//	go run ./examples/inventory/hotdeal -buyers 5000 -items phone=10,earbuds=20
//	go run ./examples/inventory/hotdeal -load 200000   # and the end-to-end rate
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	buyers := flag.Int("buyers", 2000, "buyers, each sending one reservation at the same moment")
	items := flag.String("items", "phone=10", "KEY=STOCK,... the deal's items (buyer i wants item i mod count)")
	instances := flag.Int("instances", 2, "inventory service instances (2: a hot-hot pair)")
	load := flag.Int("load", 0, "after the sale, send this many single-update transactions and report the end-to-end and database flush rates")
	dir := flag.String("dir", "", "where the stream and the databases go (default: a temporary directory, removed)")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	var its []item
	for _, kv := range strings.Split(*items, ",") {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.ParseInt(v, 10, 64)
		if !ok || err != nil || n < 0 || k == "" {
			log.Fatalf("hotdeal: -items %q: want KEY=STOCK,...", *items)
		}
		its = append(its, item{k, n})
	}
	d := *dir
	if d == "" {
		var err error
		if d, err = os.MkdirTemp("", "hotdeal-"); err != nil {
			log.Fatal(err)
		}
		defer os.RemoveAll(d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	rep, err := runDeal(ctx, dealConfig{Dir: d, Buyers: *buyers, Items: its, Instances: *instances, Load: *load, Log: os.Stderr})
	fmt.Println(rep)
	if err != nil {
		fmt.Fprintln(os.Stderr, "hotdeal: FAILED:", err)
		cancel()
		os.RemoveAll(d)
		os.Exit(1)
	}
	fmt.Println("hotdeal: ok: never oversold, every buyer answered once, the winners are the orders in every database")
}
