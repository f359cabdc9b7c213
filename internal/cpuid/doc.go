// Package cpuid tells which CPU the calling thread is running on, for
// benchmark instruments: whether a wake-up handed a frame over on the
// CPU that sent it or woke a thread on another one (on a VM, waking a
// halted vCPU costs microseconds; see docs/udp-rtt.md).
//
// On amd64 it reads the kernel's CPU number from TSC_AUX with RDTSCP (a
// few tens of nanoseconds, no system call; Linux keeps node<<12|cpu there
// for its vDSO getcpu). Elsewhere, or on a CPU without RDTSCP, Current
// returns -1: unknown. The answer is stale as soon as it is read (the
// thread may migrate); callers compare readings taken at the instants
// they care about. Safe from any goroutine; allocates nothing.
package cpuid
