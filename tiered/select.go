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
}

// Select picks the replayer to ask among candidates: one that holds
// q.From (its Lowest..Highest covers it) and announces what q needs;
// among those, the lowest tier (tier 2 replayers exist so that late
// joiners leave tier 1 alone), then the least loaded, then the one that
// holds the most past From (it will not need to follow as far), then the
// smallest name, so that every member that sees the same candidates picks
// the same one. It returns the index in candidates, or -1 when none
// qualifies. It is pure and allocates nothing.
func Select(candidates []Meta, q Query) int {
	best := -1
	for i := range candidates {
		c := &candidates[i]
		if !qualifies(c, &q) {
			continue
		}
		if best < 0 || better(c, &candidates[best]) {
			best = i
		}
	}
	return best
}

func qualifies(c *Meta, q *Query) bool {
	return c.Role == RoleReplayer &&
		(q.Session == 0 || c.Session == q.Session) &&
		c.Highest != 0 && c.Lowest <= max(q.From, 1) && max(q.From, 1) <= c.Highest &&
		(!q.NeedNAK || c.NAKAddr != "") && (!q.NeedRewind || c.RewindAddr != "")
}

// better reports whether a is preferred to b (both qualify).
func better(a, b *Meta) bool {
	switch {
	case a.Tier != b.Tier:
		return a.Tier < b.Tier
	case a.Load != b.Load:
		return a.Load < b.Load
	case a.Highest != b.Highest:
		return a.Highest > b.Highest
	}
	return a.Name < b.Name
}
