package tiered

import "testing"

func TestSelect(t *testing.T) {
	r := func(name string, tier uint8, load uint32, lo, hi uint64) Meta {
		return Meta{Name: name, Role: RoleReplayer, Tier: tier, Load: load, Lowest: lo, Highest: hi,
			Session: 7, NAKAddr: name + ":1", RewindAddr: name + ":2"}
	}
	noRewind := r("norewind", 1, 0, 1, 1000)
	noRewind.RewindAddr = ""
	otherSession := r("other", 1, 0, 1, 1000)
	otherSession.Session = 8
	seq := Meta{Name: "seq", Role: RoleSequencer, Session: 7, Lowest: 1, Highest: 1000}
	cases := []struct {
		name  string
		cands []Meta
		q     Query
		want  string // "" : none
	}{
		{"none", nil, Query{From: 1}, ""},
		{"holds the range first", []Meta{r("a", 1, 0, 500, 1000), r("b", 2, 9, 1, 1000)}, Query{From: 100}, "b"},
		{"past the newest held", []Meta{r("a", 1, 0, 1, 99)}, Query{From: 100}, ""},
		{"lowest tier", []Meta{r("t2", 2, 0, 1, 1000), r("t1", 1, 5, 1, 1000)}, Query{From: 10}, "t1"},
		{"least loaded", []Meta{r("busy", 1, 5, 1, 1000), r("idle", 1, 1, 1, 1000), r("mid", 1, 3, 1, 1000)}, Query{From: 10}, "idle"},
		{"most held on a tie", []Meta{r("short", 1, 1, 1, 900), r("long", 1, 1, 1, 1000)}, Query{From: 10}, "long"},
		{"name breaks a tie", []Meta{r("zed", 1, 1, 1, 1000), r("amy", 1, 1, 1, 1000)}, Query{From: 10}, "amy"},
		{"session", []Meta{otherSession, r("mine", 2, 9, 1, 1000)}, Query{Session: 7, From: 10}, "mine"},
		{"any session", []Meta{otherSession}, Query{From: 10}, "other"},
		{"replayers only", []Meta{seq}, Query{From: 10}, ""},
		{"needs a rewind address", []Meta{noRewind, r("full", 2, 0, 1, 1000)}, Query{From: 10, NeedRewind: true}, "full"},
		{"from 0 is seq 1", []Meta{r("a", 1, 0, 1, 10)}, Query{}, "a"},
		{"empty replayer", []Meta{r("empty", 1, 0, 0, 0)}, Query{From: 1}, ""},
		{"high tier first", []Meta{r("t1", 1, 0, 1, 1000), r("t2", 2, 5, 1, 1000)}, Query{From: 10, HighTierFirst: true}, "t2"},
		{"max tier", []Meta{r("t2", 2, 0, 1, 1000), r("t1", 1, 5, 1, 1000)}, Query{From: 10, MaxTier: 1, HighTierFirst: true}, "t1"},
		{"follow the tip", []Meta{r("a", 1, 0, 1, 99)}, Query{From: 100, Follow: true}, "a"},
		{"follow not past the tip", []Meta{r("a", 1, 0, 1, 98)}, Query{From: 100, Follow: true}, ""},
		{"avoid the failed one", []Meta{r("a", 1, 0, 1, 1000), r("b", 2, 9, 1, 1000)}, Query{From: 10, Avoid: "a:2"}, "b"},
		{"the failed one when alone", []Meta{r("a", 1, 0, 1, 1000)}, Query{From: 10, Avoid: "a:2"}, "a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			i := Select(c.cands, c.q)
			got := ""
			if i >= 0 {
				got = c.cands[i].Name
			}
			if got != c.want {
				t.Fatalf("Select = %q, want %q", got, c.want)
			}
		})
	}
	cands := []Meta{r("a", 1, 2, 1, 1000), r("b", 1, 1, 1, 1000)}
	if a := testing.AllocsPerRun(100, func() { Select(cands, Query{From: 5}) }); a != 0 {
		t.Fatalf("Select allocates %v", a)
	}
}
