//go:build !race

package invariants_test

const raceBuild = false
