package drill

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"time"

	"github.com/seqd/seqd/internal/freeport"
	"github.com/seqd/seqd/test/proc"
)

// start is what every drill's Run begins with (begin).
type start struct {
	d     *drill
	ctx   context.Context // ended by end
	seed  uint64
	r     *rand.Rand // seeded; the groups' draws are taken from it first
	sites [][]string // each site's transport flags: its stream and command groups
	end   func()     // cancel ctx, wait for every child, then remove (or report) the directory
}

// begin sets up a drill named name: its output (stdout by default), its
// seed (the clock's when 0), the seqd binary the children run (this
// process's by default), a fresh directory under prefix (kept, and said
// so at the end, with keep), the child set, and nSites sites of loopback
// multicast groups drawn from the seed with salt: site i on groups
// 239.(first+2i).A.B:P+2i and 239.(first+2i+1).A.B:P+2i+1. d.net is the
// first site's. The caller defers end.
func begin(ctx context.Context, out io.Writer, seed uint64, exe string, keep bool, name, prefix string, salt uint64, first, nSites int) (*start, error) {
	if out == nil {
		out = os.Stdout
	}
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	if exe == "" {
		var err error
		if exe, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, salt))
	port := freeport.GroupPortsOr(6, 20000+r.IntN(10000))
	a, b := 1+r.IntN(250), 1+r.IntN(250)
	var sites [][]string
	for i := range nSites {
		sites = append(sites, []string{"--transport", "udp",
			"--udp.stream-group", fmt.Sprintf("239.%d.%d.%d:%d", first+2*i, a, b, port+2*i),
			"--udp.command-group", fmt.Sprintf("239.%d.%d.%d:%d", first+2*i+1, a, b, port+2*i+1)})
	}
	ctx, cancel := context.WithCancel(ctx)
	d := &drill{exe: exe, dir: dir, out: out, procs: proc.NewSet(name), net: sites[0]}
	end := func() {
		cancel()
		for _, p := range d.procs.Started() {
			<-p.Exited()
		}
		if keep {
			fmt.Fprintf(out, "drill: directories and logs kept in %s\n", dir)
		} else {
			os.RemoveAll(dir)
		}
	}
	return &start{d: d, ctx: ctx, seed: seed, r: r, sites: sites, end: end}, nil
}
