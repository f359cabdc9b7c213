//go:build race

package multicast

// raceEnabled: under -race, sync.Pool (used by x/net WriteBatch) drops
// items at random, so allocation counts mean nothing.
const raceEnabled = true
