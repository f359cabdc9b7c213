package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestHotDeal: 300 buyers for 10 phones and 3 TVs against a real
// sequencer and replayer (loopback TCP), a pair of service instances on
// SQLite and the HTTP front: 13 winners, 287 refused, no other answer,
// the winners' seqs are the orders in both databases, the stock there is
// zero, both instances' digests equal (runDeal checks each and fails
// naming the broken promise). A short load after the sale checks the
// rate report's parts.
func TestHotDeal(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var log strings.Builder
	rep, err := runDeal(ctx, dealConfig{Dir: t.TempDir(), Buyers: 300, Items: []item{{"phone", 10}, {"tv", 3}},
		Instances: 2, Load: 2000, Log: &log})
	t.Log(log.String())
	t.Log(rep)
	if err != nil {
		t.Fatal(err)
	}
	b := rep.Buyers
	if len(b.Results) != 300 || b.Won != 13 || b.Refused != 287 || b.Timeouts+b.Errors != 0 {
		t.Fatalf("buyers %s: want 13 won, 287 refused, nothing else", b)
	}
	if len(rep.Orders) != 2 || rep.Orders[0] != 13 || rep.Orders[1] != 13 {
		t.Fatalf("orders in the databases %v, want 13 in each", rep.Orders)
	}
	if rep.LoadTxns != 2000 || rep.Flush.Batches == 0 || rep.Flush.Rows == 0 {
		t.Fatalf("load report %+v", rep)
	}
}
