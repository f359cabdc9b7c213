package main

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestSimrun_PrintsProgress: a run that takes longer than -progress says
// how far it got on stderr (make test printed nothing for minutes), and
// the summary line stays last on stdout.
func TestSimrun_PrintsProgress(t *testing.T) {
	if os.Getenv("SIMRUN_CHILD") == "1" {
		os.Args = []string{"simrun", "-seeds", "1", "-commands", "20", "-jobs", "1", "-progress", "5ms"}
		main()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=TestSimrun_PrintsProgress")
	cmd.Env = append(os.Environ(), "SIMRUN_CHILD=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("simrun: %v\n%s\n%s", err, out, stderr.String())
	}
	if !strings.Contains(stderr.String(), "sim progress: seeds ") || !strings.Contains(stderr.String(), "/1 failed 0 elapsed ") {
		t.Errorf("no progress line on stderr:\n%s", stderr.String())
	}
	if !strings.Contains(string(out), "sim seeds=1 failed=0") {
		t.Errorf("stdout:\n%s", out)
	}
}
