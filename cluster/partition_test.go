package cluster

import (
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestPartitionLayer_CutsAndHeals: switched on, a PartitionLayer closes
// the connections it holds, refuses dials and closes what it accepts;
// switched off, connections work again.
func TestPartitionLayer_CutsAndHeals(t *testing.T) {
	a, err := NewPartitionLayer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := NewPartitionLayer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	accepted := make(chan error, 8)
	go func() {
		for {
			c, err := b.Accept()
			if err != nil {
				return
			}
			go func() {
				_, err := io.Copy(c, c) // echo until closed
				accepted <- err
				c.Close()
			}()
		}
	}()
	echo := func(l *PartitionLayer) error {
		c, err := l.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("x")); err != nil {
			return err
		}
		_, err = io.ReadFull(c, make([]byte, 1))
		return err
	}
	if err := echo(a); err != nil {
		t.Fatalf("before the partition: %v", err)
	}
	// A connection held when the partition starts is closed.
	held, err := a.Dial(raft.ServerAddress(b.Addr().String()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	a.SetPartitioned(true)
	held.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := held.Read(make([]byte, 1)); err == nil {
		t.Fatal("a held connection still reads after the partition")
	}
	if err := echo(a); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("dial while partitioned: %v, want ErrPartitioned", err)
	}
	// The other side partitioned: its accept closes the connection.
	b.SetPartitioned(true)
	if err := echo(&PartitionLayer{con: map[*partitionConn]struct{}{}}); err == nil {
		t.Fatal("an accepted connection answered while partitioned")
	}
	a.SetPartitioned(false)
	b.SetPartitioned(false)
	if err := echo(a); err != nil {
		t.Fatalf("after the partition: %v", err)
	}
}
