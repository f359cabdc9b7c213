package replayer

import "sync"

// Syncer runs a Store's fsyncs (StartSync's requests) on a goroutine of
// its own, one at a time, for a shell whose loop must never wait for the
// disk (Config.SyncInShell): the replayer's Service and the cluster's
// standby. The shell hands a request over with Start, takes its outcome
// with Done (without waiting) or Wait, and reports it to the Store
// (FinishSync) itself.
//
// Concurrency: Start, Done, Wait, Out and Close belong to the shell's
// loop goroutine; the fsync runs on the Syncer's.
type Syncer struct {
	req  chan SyncRequest
	done chan syncResult
	out  bool
	wg   sync.WaitGroup
}

type syncResult struct {
	req SyncRequest
	err error
}

// NewSyncer starts the fsync goroutine; wake (nil: none) is called after
// each fsync, so that a loop blocked in its transport's Poll sees the
// outcome at once (a transport.Waker's Wake).
func NewSyncer(wake func()) *Syncer {
	y := &Syncer{req: make(chan SyncRequest, 1), done: make(chan syncResult, 1)}
	y.wg.Add(1)
	go func() {
		defer y.wg.Done()
		for req := range y.req {
			y.done <- syncResult{req: req, err: req.Run()}
			if wake != nil {
				wake()
			}
		}
	}()
	return y
}

// Start hands req to the goroutine; one must not be out (Out). It never
// blocks.
func (y *Syncer) Start(req SyncRequest) {
	y.out = true
	y.req <- req
}

// Out reports whether an fsync is under way (started, its outcome not
// taken).
func (y *Syncer) Out() bool { return y.out }

// Done returns the outcome of the fsync under way if it finished; ok is
// false when none is out or it is still running.
func (y *Syncer) Done() (req SyncRequest, err error, ok bool) {
	if !y.out {
		return SyncRequest{}, nil, false
	}
	select {
	case res := <-y.done:
		y.out = false
		return res.req, res.err, true
	default:
		return SyncRequest{}, nil, false
	}
}

// Wait waits for the fsync under way and returns its outcome; ok is false
// when none is out.
func (y *Syncer) Wait() (req SyncRequest, err error, ok bool) {
	if !y.out {
		return SyncRequest{}, nil, false
	}
	res := <-y.done
	y.out = false
	return res.req, res.err, true
}

// Close ends the goroutine once it is idle; call it after Wait.
func (y *Syncer) Close() {
	close(y.req)
	y.wg.Wait()
}
