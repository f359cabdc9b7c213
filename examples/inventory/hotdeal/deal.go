package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	"github.com/seqd/seqd/examples/inventory"
	"github.com/seqd/seqd/examples/inventory/internal/loopback"
	"github.com/seqd/seqd/node"
)

// item is a hot-deal product and its stock.
type item struct {
	Key   string
	Stock int64
}

type dealConfig struct {
	Dir       string
	Buyers    int
	Items     []item
	Instances int // service instances (a hot-hot pair: 2)
	// Load, after the sale: this many single-update transactions sent
	// as fast as the stream takes them, for the end-to-end rate.
	Load int
	Log  io.Writer
}

type dealReport struct {
	Buyers  inventory.BuyersReport
	Front   inventory.FrontStats
	Orders  []int // orders in each instance's database
	Digests []uint64
	Applied uint64

	LoadTxns    int
	LoadElapsed time.Duration // first send to the last transaction applied by every instance
	FlushLag    time.Duration // from then to the database holding it
	Flush       inventory.FlushStats
}

func (r dealReport) String() string {
	s := fmt.Sprintf("hotdeal %s front_replies=%d front_duplicates=%d orders=%v digests_equal=%v applied=%d",
		r.Buyers, r.Front.Replies, r.Front.Duplicates, r.Orders, len(slices.Compact(slices.Clone(r.Digests))) == 1, r.Applied)
	if r.LoadTxns > 0 {
		busy := r.Flush.Busy.Seconds()
		s += fmt.Sprintf("\nload txns=%d elapsed=%v e2e_tx_per_s=%.0f flush_batches=%d flush_rows=%d flush_busy=%v rows_per_busy_s=%.0f txns_per_flush_s=%.0f flush_lag=%v",
			r.LoadTxns, r.LoadElapsed.Round(time.Millisecond), float64(r.LoadTxns)/r.LoadElapsed.Seconds(),
			r.Flush.Batches, r.Flush.Rows, r.Flush.Busy.Round(time.Millisecond), float64(r.Flush.Rows)/busy,
			float64(r.LoadTxns)/busy, r.FlushLag.Round(time.Millisecond))
	}
	return s
}

type runningInstance struct {
	in   *inventory.Instance
	stop context.CancelFunc
	done chan error
}

// runDeal runs the whole deal in this process: a sequencer and replayer
// on loopback TCP, the service instances on SQLite, a front on HTTP, the
// buyers; and checks what the seed promises: never oversold, every buyer
// answered once, the winners in every instance's database.
func runDeal(ctx context.Context, cfg dealConfig) (rep dealReport, err error) {
	logf := func(format string, a ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", a...)
		}
	}
	stack, err := loopback.Start(ctx, filepath.Join(cfg.Dir, "stream"), uint64(time.Now().UnixNano()))
	if err != nil {
		return rep, err
	}
	defer func() { err = errors.Join(err, stack.Close()) }()

	var insts []*runningInstance
	defer func() {
		for _, r := range insts {
			r.stop()
			<-r.done
		}
	}()
	for i := range cfg.Instances {
		cl, err := stack.Client()
		if err != nil {
			return rep, err
		}
		icfg := inventory.InstanceConfig{Account: "INV", Instance: uint8(i + 1),
			DB: "sqlite:" + filepath.Join(cfg.Dir, fmt.Sprintf("inventory-%d.db", i+1)), Service: inventory.DefaultConfig(),
			RewindAddrs: []string{stack.RewindAddr()}}
		in, err := inventory.StartInstance(ctx, icfg, cl)
		if err != nil {
			return rep, err
		}
		rctx, stop := context.WithCancel(ctx)
		r := &runningInstance{in: in, stop: stop, done: make(chan error, 1)}
		go func() { r.done <- in.Run(rctx) }()
		insts = append(insts, r)
	}

	// The front: a gateway node and its HTTP listener.
	front, err := inventory.NewFront("FRONT", 10*time.Second)
	if err != nil {
		return rep, err
	}
	fcl, err := stack.Client()
	if err != nil {
		return rep, err
	}
	defer fcl.Close()
	fcfg := node.DefaultConfig()
	fcfg.Account = "FRONT"
	fcfg.BlockWhenFull = true
	fcfg.Window = 4096
	fnode, err := node.New(fcfg, front, fcl)
	if err != nil {
		return rep, err
	}
	front.Attach(fnode)
	fctx, fstop := context.WithCancel(ctx)
	defer fstop()
	fdone := make(chan error, 1)
	go func() { fdone <- fnode.Run(fctx) }()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return rep, err
	}
	hs := &http.Server{Handler: front, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(l)
	defer hs.Close()
	url := "http://" + l.Addr().String()
	logf("hotdeal: sequencer %s, replayer %s, %d instances, front %s", stack.TCP.Addr, stack.RewindAddr(), cfg.Instances, url)

	var keys []string
	for _, it := range cfg.Items {
		if r, err := front.Do(ctx, 0, inventory.Update{Key: it.Key, Delta: it.Stock}); err != nil || r.Outcome != inventory.OK {
			return rep, fmt.Errorf("restock %s: %v %v", it.Key, r.Outcome, err)
		}
		keys = append(keys, it.Key)
	}
	logf("hotdeal: %d buyers for %v", cfg.Buyers, cfg.Items)
	rep.Buyers = inventory.RunBuyers(ctx, inventory.BuyersConfig{URLs: []string{url}, Buyers: cfg.Buyers, Keys: keys, Timeout: 30 * time.Second})
	logf("hotdeal: %s", rep.Buyers)

	var problems []error
	won := map[string]int64{}
	wonSeqs := map[uint64]bool{}
	for _, r := range rep.Buyers.Results {
		if r.Code == http.StatusOK {
			won[r.Key]++
			if wonSeqs[r.Answer.Seq] {
				problems = append(problems, fmt.Errorf("buyer %d: seq %d won twice", r.Buyer, r.Answer.Seq))
			}
			wonSeqs[r.Answer.Seq] = true
		}
		if r.Code != http.StatusOK && r.Code != http.StatusConflict {
			problems = append(problems, fmt.Errorf("buyer %d: no answer from the stream: code %d %s", r.Buyer, r.Code, r.Err))
		}
	}
	var wantWon int64
	for _, it := range cfg.Items {
		if won[it.Key] > it.Stock {
			problems = append(problems, fmt.Errorf("OVERSOLD %s: %d won, stock %d", it.Key, won[it.Key], it.Stock))
		}
		wantWon += min(it.Stock, int64(cfg.Buyers/len(cfg.Items)))
	}
	// Each request answered from the stream once: the front took one
	// reply per request (restocks and buyers) and dropped the rest.
	rep.Front = front.Stats()
	if want := uint64(cfg.Buyers + len(cfg.Items)); rep.Front.Replies != want || rep.Front.Timeouts != 0 {
		problems = append(problems, fmt.Errorf("front: %d requests answered from the stream, %d timed out; want %d, none", rep.Front.Replies, rep.Front.Timeouts, want))
	}
	if int64(rep.Buyers.Won) != wantWon && rep.Buyers.Errors == 0 && rep.Buyers.Timeouts == 0 {
		problems = append(problems, fmt.Errorf("%d won, want %d (every item sold out, each once)", rep.Buyers.Won, wantWon))
	}

	if cfg.Load > 0 {
		if err := runLoad(ctx, stack, insts, cfg.Load, &rep); err != nil {
			return rep, err
		}
	}

	// Wait until every instance applied the whole stream, then stop them
	// (Run flushes) and read their databases.
	if err := settle(ctx, stack, insts); err != nil {
		return rep, err
	}
	for _, r := range insts {
		r.stop()
		if err := <-r.done; err != nil {
			return rep, err
		}
	}
	for i, r := range insts {
		st := r.in.Service.Status()
		rep.Digests = append(rep.Digests, st.Digest)
		rep.Applied = st.Applied
		db, err := inventory.OpenStore(ctx, "sqlite:"+filepath.Join(cfg.Dir, fmt.Sprintf("inventory-%d.db", i+1)))
		if err != nil {
			return rep, err
		}
		orders, err := db.Orders(ctx)
		snap, lerr := db.Load(ctx)
		db.Close()
		if err = errors.Join(err, lerr); err != nil {
			return rep, err
		}
		n := 0
		for _, o := range orders {
			if slices.Contains(keys, o.Key) {
				n++
				if !wonSeqs[o.Seq] {
					problems = append(problems, fmt.Errorf("instance %d: order at seq %d (ref %d) that no buyer was told he won", i+1, o.Seq, o.Ref))
				}
			}
		}
		rep.Orders = append(rep.Orders, n)
		if n != rep.Buyers.Won {
			problems = append(problems, fmt.Errorf("instance %d: %d orders in the database, %d buyers won", i+1, n, rep.Buyers.Won))
		}
		for k, key := range snap.Keys {
			for _, it := range cfg.Items {
				if it.Key == key && snap.Stock[k] != it.Stock-won[key] {
					problems = append(problems, fmt.Errorf("instance %d: %s stock %d in the database, want %d", i+1, key, snap.Stock[k], it.Stock-won[key]))
				}
			}
		}
		if snap.Seq != st.Applied || snap.Digest != st.Digest {
			problems = append(problems, fmt.Errorf("instance %d: database at seq %d, applied %d", i+1, snap.Seq, st.Applied))
		}
	}
	insts = nil
	if len(slices.Compact(slices.Clone(rep.Digests))) != 1 {
		problems = append(problems, fmt.Errorf("digests differ: %x", rep.Digests))
	}
	return rep, errors.Join(problems...)
}

// settle waits until the stream is quiet and every instance applied it.
func settle(ctx context.Context, stack *loopback.Stack, insts []*runningInstance) error {
	var last uint64
	for quiet := 0; quiet < 10; {
		select {
		case <-ctx.Done():
			return fmt.Errorf("settle: %w (stream at %d)", ctx.Err(), stack.LastSeq())
		case <-time.After(25 * time.Millisecond):
		}
		l := stack.LastSeq()
		ok := l == last
		for _, r := range insts {
			if r.in.Service.Status().Applied != l {
				ok = false
			}
		}
		if ok {
			quiet++
		} else {
			quiet = 0
		}
		last = l
	}
	return nil
}

// runLoad sends n single-update transactions (no order recorded) from a
// node of its own and measures until every instance applied them, and
// until the first instance's database holds them.
func runLoad(ctx context.Context, stack *loopback.Stack, insts []*runningInstance, n int, rep *dealReport) error {
	if err := settle(ctx, stack, insts); err != nil {
		return err
	}
	cl, err := stack.Client()
	if err != nil {
		return err
	}
	defer cl.Close()
	cfg := node.DefaultConfig()
	cfg.Account = "LOAD"
	cfg.BlockWhenFull = true
	cfg.Window = 8192
	nd, err := node.New(cfg, nopHandler{}, cl)
	if err != nil {
		return err
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go nd.Run(lctx)
	base := make([]uint64, len(insts))
	for i, r := range insts {
		base[i] = r.in.Service.Status().Txns
	}
	const keys = 1000
	t0 := time.Now()
	p := make([]byte, 0, 64)
	for i := range n {
		k := fmt.Sprintf("bulk-%04d", i%keys)
		delta := int64(-1)
		if i < keys {
			delta = int64(n) // stocked for every reservation
		}
		p, _ = inventory.AppendTxn(p[:0], 0, uint64(i+1), inventory.Update{Key: k, Delta: delta})
		if _, err := nd.SendContext(ctx, p); err != nil {
			return fmt.Errorf("load: send %d: %w", i, err)
		}
	}
	for {
		done := true
		for i, r := range insts {
			if r.in.Service.Status().Txns < base[i]+uint64(n) {
				done = false
			}
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("load: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	rep.LoadTxns, rep.LoadElapsed = n, time.Since(t0)
	svc := insts[0].in.Service
	target := svc.Status().Applied
	for svc.Status().Flushed < target {
		select {
		case <-ctx.Done():
			return fmt.Errorf("load: flush: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	rep.FlushLag = time.Since(t0) - rep.LoadElapsed
	rep.Flush = svc.FlushStats()
	return nil
}

type nopHandler struct{}

func (nopHandler) OnMessage(*node.Message) {}
