package receiver

// cut is what the receiver knows of one epoch: where it starts.
type cut struct {
	epoch uint32
	start uint64
}

// maxCuts bounds the table; the oldest epochs are forgotten first (their
// seqs were delivered long ago).
const maxCuts = 32

// cutTable holds the first seq of each epoch this receiver has seen in a
// header, sorted by epoch. The cut of epoch e is start(e+1)-1, so a record
// of seq q belongs to the newest epoch whose start is at or below q: that
// is a property of the stream, the same on every receiver and in a replay,
// whichever packet carried the record.
type cutTable struct {
	n    int
	cuts [maxCuts]cut
}

func (t *cutTable) reset() { t.n = 0 }

// startOf is the first seq of epoch e, if known.
func (t *cutTable) startOf(e uint32) (uint64, bool) {
	for i := 0; i < t.n; i++ {
		if t.cuts[i].epoch == e {
			return t.cuts[i].start, true
		}
	}
	return 0, false
}

// add records that epoch e starts at start, unless that contradicts what
// is known: starts never go back as epochs grow. It reports whether the
// pair is consistent (known already, or added).
func (t *cutTable) add(e uint32, start uint64) bool {
	i := 0
	for i < t.n && t.cuts[i].epoch < e {
		if t.cuts[i].start > start {
			return false
		}
		i++
	}
	if i < t.n && t.cuts[i].epoch == e {
		return t.cuts[i].start == start
	}
	if i < t.n && t.cuts[i].start < start {
		return false
	}
	if t.n == maxCuts {
		if i == 0 {
			return true // older than everything kept: nothing to learn
		}
		copy(t.cuts[:], t.cuts[1:t.n])
		t.n--
		i--
	}
	copy(t.cuts[i+1:t.n+1], t.cuts[i:t.n])
	t.cuts[i] = cut{e, start}
	t.n++
	return true
}

// dropAfter forgets the epochs newer than e.
func (t *cutTable) dropAfter(e uint32) {
	for t.n > 0 && t.cuts[t.n-1].epoch > e {
		t.n--
	}
}

// startAfter is the start of the oldest known epoch newer than e (the
// current epoch's start at most); 0 if none.
func (t *cutTable) startAfter(e uint32) uint64 {
	for i := 0; i < t.n; i++ {
		if t.cuts[i].epoch > e {
			return t.cuts[i].start
		}
	}
	return 0
}

// epochOf is the epoch of seq q: the newest known epoch starting at or
// below q, provided the next epoch is known too (else its cut, and so q's
// epoch, is unknown) or it is the newest known one.
func (t *cutTable) epochOf(q uint64) (uint32, bool) {
	for i := t.n - 1; i >= 0; i-- {
		c := t.cuts[i]
		if c.start > q {
			continue
		}
		if i == t.n-1 || t.cuts[i+1].epoch == c.epoch+1 {
			return c.epoch, true
		}
		return 0, false
	}
	return 0, false
}

// run is where this receiver's delivery entered an epoch: the first seq
// it delivered (or, live, would deliver first) in it.
type run struct {
	epoch uint32
	first uint64
}

// runTable remembers, for each epoch this receiver delivered from, where
// that began, so that an epoch start learned late (from a repair's header
// or a duplicate EpochStart record, after the receiver went on into a
// newer epoch) is checked against what was delivered from the older ones.
// Epochs delivered from ascend with seqs, so the runs are sorted by both;
// the oldest are forgotten first.
type runTable struct {
	n    int
	runs [maxCuts]run
}

func (t *runTable) reset() { t.n = 0 }

// enter records that delivery entered epoch e at seq first.
func (t *runTable) enter(e uint32, first uint64) {
	if t.n > 0 && t.runs[t.n-1].epoch >= e {
		return
	}
	if t.n == maxCuts {
		copy(t.runs[:], t.runs[1:])
		t.n--
	}
	t.runs[t.n] = run{e, first}
	t.n++
}

// last is the newest epoch entered (0 if none).
func (t *runTable) last() uint32 {
	if t.n == 0 {
		return 0
	}
	return t.runs[t.n-1].epoch
}

// below is the highest seq delivered in an epoch older than e, and that
// epoch, given that next is the next seq to deliver; false when nothing
// was delivered from an epoch older than e.
func (t *runTable) below(e uint32, next uint64) (uint64, uint32, bool) {
	i := 0
	for i < t.n && t.runs[i].epoch < e {
		i++
	}
	if i == 0 {
		return 0, 0, false
	}
	end := next
	if i < t.n {
		end = t.runs[i].first
	}
	if end <= t.runs[i-1].first {
		return 0, 0, false // entered, nothing delivered in it yet
	}
	return end - 1, t.runs[i-1].epoch, true
}
