package tiered

// Query says what a member looks for in a replayer.
type Query struct {
	// Session: only replayers of this session (0: any).
	Session uint64
	// From is the first seq wanted: the replayer must hold it.
	From uint64
	// NeedNAK, NeedRewind: the replayer must announce that address.
	NeedNAK    bool
	NeedRewind bool
	// Follow: the asker follows the replayer's tip (a tier-2 replayer, a
	// rewind that resumes): a replayer whose newest seq is just below
	// From qualifies too (From <= Highest+1), as its store grows.
	Follow bool
	// MaxTier: only replayers of this tier or lower (0: any), so that a
	// tier-2 replayer follows a tier 1, never itself or another tier 2.
	MaxTier uint8
	// HighTierFirst prefers the highest tier instead of the lowest: late
	// joiners' rewinds go to tier-2 replayers, which exist so that they
	// leave tier 1 alone; tier 1 serves them only when no tier 2 holds
	// the range.
	HighTierFirst bool
	// Avoid is a rewind or NAK address that just failed the asker: a
	// replayer announcing it is picked only when no other qualifies.
	Avoid string
}

// Select picks the replayer to ask among candidates: one that holds
// q.From (its Lowest..Highest covers it) and announces what q needs,
// not announcing q.Avoid unless no other qualifies; among those, the
// lowest tier (the highest with q.HighTierFirst: tier 2 replayers exist
// so that late joiners leave tier 1 alone), then the least loaded, then the one that
// holds the most past From (it will not need to follow as far), then the
// smallest name, so that every member that sees the same candidates picks
// the same one. It returns the index in candidates, or -1 when none
// qualifies. It is pure and allocates nothing.
func Select(candidates []Meta, q Query) int {
	best, avoided := -1, -1
	for i := range candidates {
		c := &candidates[i]
		if !qualifies(c, &q) {
			continue
		}
		if q.Avoid != "" && (c.RewindAddr == q.Avoid || c.NAKAddr == q.Avoid) {
			if avoided < 0 || better(c, &candidates[avoided], q.HighTierFirst) {
				avoided = i
			}
			continue
		}
		if best < 0 || better(c, &candidates[best], q.HighTierFirst) {
			best = i
		}
	}
	if best < 0 {
		return avoided
	}
	return best
}

func qualifies(c *Meta, q *Query) bool {
	from := max(q.From, 1)
	hi := c.Highest
	if q.Follow {
		hi++
	}
	return c.Role == RoleReplayer &&
		(q.Session == 0 || c.Session == q.Session) &&
		(q.MaxTier == 0 || c.Tier <= q.MaxTier) &&
		c.Highest != 0 && c.Lowest <= from && from <= hi &&
		(!q.NeedNAK || c.NAKAddr != "") && (!q.NeedRewind || c.RewindAddr != "")
}

// better reports whether a is preferred to b (both qualify).
func better(a, b *Meta, highTierFirst bool) bool {
	switch {
	case a.Tier != b.Tier:
		return (a.Tier < b.Tier) != highTierFirst
	case a.Load != b.Load:
		return a.Load < b.Load
	case a.Highest != b.Highest:
		return a.Highest > b.Highest
	}
	return a.Name < b.Name
}
