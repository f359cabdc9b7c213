package cpuid

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// TestCurrent_NamesTheCPUTheThreadIsPinnedTo pins the test's thread to
// each CPU it may use in turn and checks that Current names that one (or
// says it cannot know, -1, off amd64).
func TestCurrent_NamesTheCPUTheThreadIsPinnedTo(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		t.Skipf("sched_getaffinity: %v", err)
	}
	defer unix.SchedSetaffinity(0, &all)
	known := 0
	for cpu := 0; cpu < 1024; cpu++ {
		if !all.IsSet(cpu) {
			continue
		}
		var one unix.CPUSet
		one.Set(cpu)
		if err := unix.SchedSetaffinity(0, &one); err != nil {
			t.Fatalf("sched_setaffinity %d: %v", cpu, err)
		}
		got := Current()
		if got == -1 {
			continue
		}
		known++
		if got != cpu {
			t.Fatalf("pinned to CPU %d, Current() = %d", cpu, got)
		}
	}
	t.Logf("checked %d CPUs (runtime.GOARCH %s)", known, runtime.GOARCH)
	if runtime.GOARCH == "amd64" && rdtscpOK && known == 0 {
		t.Fatal("RDTSCP present but no CPU checked")
	}
}

func TestCurrent_AllocatesNothing(t *testing.T) {
	if a := testing.AllocsPerRun(1000, func() { _ = Current() }); a != 0 {
		t.Fatalf("%v allocs per call", a)
	}
}

func BenchmarkCurrent(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = Current()
	}
}
