//go:build !amd64

package cpuid

// Current returns -1: this architecture has no cheap way to read it here.
func Current() int { return -1 }

// rdtscpOK is false: no RDTSCP here.
const rdtscpOK = false
