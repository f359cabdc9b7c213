//go:build invariants

package invariants_test

const taggedBuild = true
