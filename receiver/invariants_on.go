//go:build invariants

package receiver

// invariants turns on costly self-checks (go test -tags invariants).
const invariants = true
