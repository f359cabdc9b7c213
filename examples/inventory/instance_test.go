package inventory_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/seqd/seqd/examples/inventory"
	"github.com/seqd/seqd/examples/inventory/internal/loopback"
)

// TestInstance_StopsWhenTheDatabaseFails: a database that refuses a
// flush stops the instance with the store's error (not a state in memory
// running on ahead of what a restart could recover).
func TestInstance_StopsWhenTheDatabaseFails(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	stack, err := loopback.Start(ctx, filepath.Join(dir, "stream"), 0x1418)
	if err != nil {
		t.Fatal(err)
	}
	defer stack.Close()
	cl, err := stack.Client()
	if err != nil {
		t.Fatal(err)
	}
	cfg := inventory.InstanceConfig{Account: "INV", Instance: 3, DB: "sqlite:" + filepath.Join(dir, "c.db"), Service: inventory.DefaultConfig()}
	in, err := inventory.StartInstance(ctx, cfg, cl)
	if err != nil {
		t.Fatal(err)
	}
	in.Store.DB().Close()
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	load(t, ctx, stack, 50, 5, nil)
	select {
	case err := <-done:
		if !errors.Is(err, inventory.ErrStore) {
			t.Fatalf("Run: %v, want the store's error", err)
		}
		t.Log(err)
	case <-ctx.Done():
		t.Fatal("the instance kept running on a failed database")
	}
}
