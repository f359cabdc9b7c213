//go:build !invariants && !race

package invariants

// Enabled is false: this build checks no invariants (build with -race or
// -tags invariants to check them).
const Enabled = false
