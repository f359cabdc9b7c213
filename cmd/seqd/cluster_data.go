package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cluster"
)

// dataPath is this member's data path: newFollower opens a standby (the
// Node calls it at start and whenever the member stops being primary) and
// run serves the stored stream to catching-up members for as long as the
// process lives.
type dataPath struct {
	newFollower func() (cluster.Follower, error)
	run         func(context.Context) error
	close       func()
}

// openDataPath prepares the data path of member cfg.ID: its stream store
// in dir, its fetch server on fetch.
func openDataPath(c *cli.Context, cfg cluster.Config, fetch, dir string, log *slog.Logger) (*dataPath, error) {
	return nil, errors.New("--cluster: the standby (cluster data path) is not built yet")
}

// newAcks is the quorum of an epoch's voters: the primary's stable seq.
func newAcks(e cluster.Epoch) cluster.Acks { return cluster.NewQuorumAcks(e) }
