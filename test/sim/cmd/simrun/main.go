// Command simrun runs the deterministic simulator over a range of seeds and
// ends with the line "sim seeds=N failed=F". A failing seed prints the one
// command that replays it. While it runs it prints a progress line to
// stderr every -progress (make test stays quiet for minutes otherwise).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/test/sim"
)

func main() {
	seeds := flag.Int("seeds", 200, "run seeds 1..N")
	seed := flag.Uint64("seed", 0, "run only this seed (replay)")
	commands := flag.Int("commands", sim.DefaultConfig().Commands, "commands per seed")
	jobs := flag.Int("jobs", runtime.GOMAXPROCS(0), "seeds run in parallel (each run is single-threaded and deterministic)")
	verbose := flag.Bool("v", false, "print every seed")
	with := flag.String("with", "", "scenarios to turn on (all are on by default; for configs that turn some off)")
	progress := flag.Duration("progress", 10*time.Second, "print a progress line (seeds done, failed, elapsed) to stderr this often (0: never)")
	without := flag.String("without", "", "scenarios to turn off, comma-separated: "+strings.Join(sim.Scenarios(), ","))
	flag.Parse()
	base := sim.DefaultConfig()
	base.Commands = *commands
	if err := base.With(*with); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := base.Without(*without); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}

	list := []uint64{*seed}
	if *seed == 0 {
		list = list[:0]
		for s := 1; s <= *seeds; s++ {
			list = append(list, uint64(s))
		}
	}
	var failed, done atomic.Int64
	stop := make(chan struct{})
	if *progress > 0 {
		go reportProgress(os.Stderr, *progress, len(list), &done, &failed, stop)
	}
	var mu sync.Mutex
	next := make(chan uint64)
	var wg sync.WaitGroup
	for j := 0; j < *jobs; j++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range next {
				cfg := base
				cfg.Seed = s
				r := sim.Run(cfg)
				mu.Lock()
				if r.Err != nil {
					failed.Add(1)
					fmt.Printf("seed %d FAILED: %v\n  replay: %s\n", s, r.Err, r.Replay())
				} else if *verbose {
					st := r.Sequencer
					fmt.Printf("seed %d ok: steps=%d virtual=%v sequenced=%d commands=%d naks=%d retransmitted=%d multicast_repairs=%d throttled=%d gones=%d clock_steps=%d epoch_changes=%d divergences=%d too_large=%d stale_replayed=%d rewind_opens=%d rewind_fails=%d checkpoints=%d checkpoints_refused=%d checkpoints_dropped=%d kills=%d restarts=%d standby_faults=%d replayer_repairs=%d replayer_crashes=%d replayer_power_losses=%d power_losses=%d pair_kills=%d pair_pauses=%d pair_partitions=%d pair_switches=%d pair_fenced=%d\n",
						s, r.Steps, r.Virtual, r.Sequenced, r.Commands, st.Naks, st.Retransmitted, st.RepairsMulticast, st.Throttled, st.Gones, r.ClockSteps, r.EpochChanges, r.Divergences, r.TooLarge, r.StaleReplayed, r.RewindOpens, r.RewindFails, r.Checkpoints, r.CheckpointsRefused, r.CheckpointsDropped, r.Kills, r.Restarts, r.StandbyFaults, r.ReplayerRepairs, r.ReplayerCrashes, r.ReplayerPowerLosses, r.PowerLosses,
						r.PairKills, r.PairPauses, r.PairPartitions, st.ActivationSwitch, st.RejectedNotActive)
					if r.Config.StoreFaults {
						fmt.Printf("  store: flips=%d refused=%d replayer_crashes=%d member_flips=%d members_moved_aside=%d\n", r.StoreFlips, r.StoreRefusals, r.ReplayerCrashes, r.MemberFlips, r.MembersMovedAside)
					}
					if r.Config.Bridge {
						fmt.Printf("  bridge: tcp_cuts=%d udp_cuts=%d gap_restarts=%d commands_back=%d end_crashes=%d\n", r.BridgeCuts, r.BridgeUDPCuts, r.BridgeGapRestarts, r.BridgeCommands, r.BridgeEndCrashes)
					}
				}
				mu.Unlock()
				done.Add(1)
			}
		}()
	}
	for _, s := range list {
		next <- s
	}
	close(next)
	wg.Wait()
	close(stop)
	fmt.Printf("sim seeds=%d failed=%d\n", len(list), failed.Load())
	if failed.Load() > 0 {
		os.Exit(1)
	}
}

// reportProgress writes "sim progress: seeds D/N failed F elapsed E" to w
// every interval until stop is closed.
func reportProgress(w io.Writer, every time.Duration, total int, done, failed *atomic.Int64, stop <-chan struct{}) {
	start := time.Now()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			fmt.Fprintf(w, "sim progress: seeds %d/%d failed %d elapsed %s\n", done.Load(), total, failed.Load(), time.Since(start).Round(time.Second))
		}
	}
}
