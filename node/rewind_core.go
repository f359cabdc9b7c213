package node

// StepRewind feeds one packet of a rewind stream (a replayer's stored
// stream from Config.RewindFrom on, docs/protocol.md "Rewind") as a
// repair: see receiver.Receiver.StepRewind. Before a live packet started
// the receiver it returns receiver.ErrNotStarted and the caller keeps the
// packet. It is no evidence of a live sequencer (resend timers ignore it).
func (c *Core) StepRewind(now int64, pkt []byte) error {
	if c.err != nil {
		return c.err
	}
	c.clock = now
	err := c.r.StepRewind(now, pkt)
	c.handleReady()
	if c.err != nil {
		return c.err
	}
	return err
}

// SetRewindOpen tells the Core whether a rewind stream is open: while it
// is, gaps are not NAKed (the rewind fills them in order).
func (c *Core) SetRewindOpen(on bool) { c.r.SetRewinding(on) }

// Started reports whether a live packet fixed the session and where the
// stream starts (FirstLive).
func (c *Core) Started() bool { return c.r.Started() }

// RewindCaughtUp reports whether a rewind stream can close: delivery has
// reached the first seq seen live and the receiver holds everything
// known to exist up to the live tail (no live packet is missing, e.g.
// dropped beyond the receive ring while the rewind ran). From here on the
// live stream (and ordinary NAKs) carry the node.
func (c *Core) RewindCaughtUp() bool {
	r := c.r
	return r.Started() && r.Next() > r.FirstLive() && r.Contiguous() >= r.Tail()
}

// ResumeFrom is where a rewind that failed resumes: the seq after the
// highest one the receiver holds whole with everything before it
// (delivered, or held until stable), so nothing is fetched twice that
// is held and nothing is skipped; the next seq to deliver before a live
// packet started the receiver.
func (c *Core) ResumeFrom() uint64 {
	if !c.r.Started() {
		return c.Delivered() + 1
	}
	return max(c.r.Contiguous(), c.Delivered()) + 1
}

// Commit prepares a restart from the application's own snapshot, which
// holds every message up to seq: the node rewinds from seq+1 (and
// Rewinding is true until it reaches the live stream). Commit(0) rewinds
// from seq 1.
func (c *Config) Commit(seq uint64) {
	c.Rewind = true
	c.RewindFrom = seq + 1
}
