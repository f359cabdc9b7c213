// Package invariants says whether costly self-checks are compiled in.
//
// Enabled is a constant: true in a build with the tag `invariants` or
// with the race detector (`go test -race`, which `make test` always
// uses), false otherwise. Code guards a check with
//
//	if invariants.Enabled {
//		x.checkInvariants()
//	}
//
// and the compiler drops the branch, and whatever the check would cost,
// from an ordinary build: hot paths stay as fast and as allocation-free
// as without it (the zero-allocation tests run without -race).
//
// A check panics when it finds a broken invariant: that is a bug in the
// package, never bad input (input errors are returned). Each check must
// be able to fail: its package has a test that breaks the invariant on
// purpose and sees the panic (skipped when Enabled is false).
//
// The package has no state and no goroutines.
package invariants
