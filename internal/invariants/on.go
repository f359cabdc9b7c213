//go:build invariants || race

package invariants

// Enabled is true: this build checks invariants (tag invariants, or -race).
const Enabled = true
