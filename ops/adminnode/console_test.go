package adminnode

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/seqd/seqd/ops/page"
	"github.com/seqd/seqd/tiered"
)

// members is a fixed gossip membership.
type members []tiered.Member

func (m members) Members() []tiered.Member { return m }

func TestConsole_ListsWhatGossipShows(t *testing.T) {
	dir := members{
		{Name: "seq-1", Addr: "127.0.0.1:7946", Meta: tiered.Meta{Name: "seq-1", Role: tiered.RoleSequencer, AdminAddr: "127.0.0.1:7401"}},
		{Name: "rep-1", Addr: "127.0.0.1:7947", Meta: tiered.Meta{Name: "rep-1", Role: tiered.RoleReplayer, Tier: 1, Lowest: 1, Highest: 900, RewindAddr: "127.0.0.1:9400"}},
		{Name: "odd", Addr: "127.0.0.1:7948", Err: errors.New("bad meta")},
	}
	d := NewDeployment(dir, []string{"127.0.0.1:7402", "127.0.0.1:7401"})
	if got := d.AdminAddrs(); strings.Join(got, ",") != "127.0.0.1:7401,127.0.0.1:7402" {
		t.Fatalf("admin addresses %v: want gossip's, then the static one, once each", got)
	}
	c := NewConsole(d, func(context.Context) page.Status { return page.Status{} })
	ctx := context.Background()
	out, err := c.Exec(ctx, "list")
	if err != nil || !strings.Contains(out, "seq-1") || !strings.Contains(out, "tier 1 holds 1..900") || !strings.Contains(out, "bad meta") {
		t.Fatalf("list: %v\n%s", err, out)
	}
	out, err = c.Exec(ctx, "replayers")
	if err != nil || !strings.Contains(out, "rep-1 tier=1 session=0 holds=1..900 rewind=127.0.0.1:9400") {
		t.Fatalf("replayers: %v\n%s", err, out)
	}
	for line, want := range map[string]string{
		"transfer-primary x": `transfer-primary "x": want a member id`,
		"transfer-primary":   "the group has no primary now",
		"launch":             `unknown command "launch": try help`,
	} {
		if _, err := c.Exec(ctx, line); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", line, err, want)
		}
	}
	if out, _ := c.Exec(ctx, "elections"); out != "no election seen yet\n" {
		t.Errorf("elections: %q", out)
	}
}
