package cpuid

// rdtscpOK: CPUID leaf 0x80000001 EDX bit 27 (RDTSCP) is set.
var rdtscpOK = extFeaturesEDX()&(1<<27) != 0

// Current returns the number of the CPU the calling thread runs on, or -1
// if it cannot be read cheaply.
func Current() int {
	if !rdtscpOK {
		return -1
	}
	return int(tscAux() & 0xfff) // Linux: node<<12 | cpu
}

// tscAux executes RDTSCP and returns ECX (TSC_AUX).
func tscAux() uint32

// extFeaturesEDX executes CPUID leaf 0x80000001 and returns EDX.
func extFeaturesEDX() uint32
