package drill

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// children starts seqd processes for a test, each with its output in a
// buffer (its last lines logged if the test fails), and kills those
// still running when the test ends.
type children struct {
	t    *testing.T
	ctx  context.Context
	exe  string
	cmds []*exec.Cmd
}

func newChildren(t *testing.T, ctx context.Context, exe string) *children {
	c := &children{t: t, ctx: ctx, exe: exe}
	t.Cleanup(func() {
		for _, cmd := range c.cmds {
			if cmd.Process != nil {
				cmd.Process.Kill()
				cmd.Wait()
			}
		}
	})
	return c
}

// start runs seqd with args as the child called name.
func (c *children) start(name string, args ...string) (*exec.Cmd, *lockedBuffer) {
	var out lockedBuffer
	cmd := exec.CommandContext(c.ctx, c.exe, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	c.cmds = append(c.cmds, cmd)
	c.t.Cleanup(func() {
		if c.t.Failed() {
			c.t.Logf("%s:\n%s", name, lastLines(out.String(), 15))
		}
	})
	return cmd, &out
}

// waitFor fails the test unless name prints s within 20 s.
func (c *children) waitFor(name string, out *lockedBuffer, s string) {
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(out.String(), s); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			c.t.Fatalf("%s did not print %q", name, s)
		}
	}
}
