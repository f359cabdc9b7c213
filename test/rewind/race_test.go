//go:build race

package rewind

// raceEnabled: the race detector slows everything ~10x; the tests use
// fewer messages under it.
const raceEnabled = true
