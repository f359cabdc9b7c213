package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/cluster"
)

// newFollower opens this member's standby: the data path that follows,
// persists and acks the stream, and serves it to a catching-up primary on
// fetch. It returns the follower, its run loop and its closer.
func newFollower(c *cli.Context, cfg cluster.Config, fetch, dir string, log *slog.Logger) (cluster.Follower, func(context.Context) error, func(), error) {
	return nil, nil, nil, errors.New("--cluster: the standby (cluster data path) is not built yet")
}

// newAcks is the quorum of an epoch's voters: the primary's stable seq.
func newAcks(e cluster.Epoch) cluster.Acks { return cluster.NewQuorumAcks(e) }
