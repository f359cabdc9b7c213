package main

import (
	"slices"
	"testing"
)

// TestFlagsFirst: `seqd replay DIR --from N` parses as written: the
// directory moves after the flags (values stay with their flags, booleans
// take none), and other commands are left alone.
func TestFlagsFirst(t *testing.T) {
	cmd := replayCommand()
	cases := []struct{ in, want []string }{
		{[]string{"seqd", "replay", "d", "--from", "5", "--to", "9"}, []string{"seqd", "replay", "--from", "5", "--to", "9", "--", "d"}},
		{[]string{"seqd", "replay", "--quiet", "d", "--account=alice"}, []string{"seqd", "replay", "--quiet", "--account=alice", "--", "d"}},
		{[]string{"seqd", "replay", "--from", "5", "d", "--stable-only", "--format", "json"}, []string{"seqd", "replay", "--from", "5", "--stable-only", "--format", "json", "--", "d"}},
		{[]string{"seqd", "replay", "-h"}, []string{"seqd", "replay", "-h"}},
		{[]string{"seqd", "replay", "--", "-odd-dir"}, []string{"seqd", "replay", "--", "-odd-dir"}},
		{[]string{"seqd", "tail", "x", "--from", "5"}, []string{"seqd", "tail", "x", "--from", "5"}},
	}
	for _, c := range cases {
		if got := flagsFirst(c.in, cmd); !slices.Equal(got, c.want) {
			t.Errorf("flagsFirst(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
