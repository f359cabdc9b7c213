package sim

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/internal/vfs"
	"github.com/seqd/seqd/replayer"
)

// Store faults (Config.StoreFaults; `simrun -with store`): while the
// replayer is down after a crash, one bit of one of its segment files on
// its vfs.MemFS is flipped now and then (a disk that rotted). On restart
// the store must find it by its checksum: either it refuses to open
// (replayer.ErrCorrupt: the service does not start; the simulator then
// plays the operator, who restores the file from a copy, and starts it
// again) or, for the last frame of the newest segment, it cuts it as a
// torn tail and fetches it again. Checked at once after every restart:
// a store that opened must no longer hold the flipped byte (a record it
// would serve). A node that was served a corrupt record fails its
// payload check; the store's records are compared with the stream at
// the end.

// storeFlip is a flipped bit in a file of the replayer's store.
type storeFlip struct {
	path      string
	off       int64
	orig, bad byte
}

// corruptStore flips one bit of a segment file (Config.StoreFaults), in
// at each crash.
func (r *simReplayer) corruptStore() {
	if !r.w.cfg.StoreFaults || r.flip != nil {
		return
	}
	if r.flip = flipBit(r.w, r.fs, filepath.Join(r.dir, "store")); r.flip != nil {
		r.flips++
	}
}

// flipBit flips one bit of one of the segment files in dir (past its
// header), seeded; nil when dir holds none with a frame.
func flipBit(w *world, fs *vfs.MemFS, dir string) *storeFlip {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil
	}
	var segs []string
	var sizes []int64
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".seg") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if sz := fileSize(fs, p); sz > replayer.SegmentHeaderBytes+replayer.FrameHeaderBytes {
			segs, sizes = append(segs, p), append(sizes, sz)
		}
	}
	if len(segs) == 0 {
		return nil
	}
	i := w.rng.IntN(len(segs))
	off := replayer.SegmentHeaderBytes + w.rng.Int64N(sizes[i]-replayer.SegmentHeaderBytes)
	b, ok := readByte(fs, segs[i], off)
	if !ok {
		w.fail("store fault: read %s at %d", segs[i], off)
		return nil
	}
	fl := &storeFlip{path: segs[i], off: off, orig: b, bad: b ^ 1<<w.rng.IntN(8)}
	if err := writeByte(fs, fl.path, fl.off, fl.bad); err != nil {
		w.fail("%v", err)
		return nil
	}
	return fl
}

// restartStore starts the replayer again on its store, with a flipped
// bit in it or not (see corruptStore).
func (r *simReplayer) restartStore() error {
	fl := r.flip
	err := r.start()
	if fl == nil {
		return err
	}
	r.flip = nil
	if errors.Is(err, replayer.ErrCorrupt) {
		// Refused, as it must: the operator restores the file.
		r.refusals++
		if err := writeByte(r.fs, fl.path, fl.off, fl.orig); err != nil {
			return err
		}
		return r.start()
	}
	if err != nil {
		return err
	}
	// It opened: the flipped byte must be gone (a torn tail cut).
	if b, ok := readByte(r.fs, fl.path, fl.off); ok && b == fl.bad {
		r.w.fail("the replayer opened its store with a corrupt byte (bit flipped at offset %d of %s) and serves it (contiguous %d)",
			fl.off, filepath.Base(fl.path), r.svc.Store().Contiguous())
	}
	return nil
}

func fileSize(m *vfs.MemFS, p string) int64 {
	f, err := m.Open(p)
	if err != nil {
		return 0
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0
	}
	return st.Size()
}

func readByte(fs *vfs.MemFS, p string, off int64) (byte, bool) {
	f, err := fs.Open(p)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		return 0, false
	}
	return b[0], true
}

func writeByte(fs *vfs.MemFS, p string, off int64, v byte) error {
	f, err := fs.OpenReadWrite(p)
	if err != nil {
		return fmt.Errorf("store fault: restore %s: %w", p, err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{v}, off); err != nil {
		return fmt.Errorf("store fault: restore %s: %w", p, err)
	}
	return f.Sync()
}

// Standby store faults (StoreFaults with Cluster): when a member is
// killed, one time in three a bit of its store is flipped while it is
// down. On restart the store must find it: the standby refuses to start
// (its error names the way out), and the simulator plays the operator,
// who moves the directory aside and starts the member on an empty one:
// it fetches the stream from the live standbys (CatchUpFrom, as it does
// over the fetch port) up to what is stable, then follows. Or the flip
// was in the newest segment's last frame, cut as a torn tail: the store
// opened and must no longer hold the flipped byte. At the end every
// member must hold the stream and its State (simCluster.check).

// corruptMember flips a bit of m's store, now and then (it is down).
func (c *simCluster) corruptMember(m *member) {
	w := c.w
	if !w.cfg.StoreFaults || m.flip != nil || w.rng.IntN(3) != 0 {
		return
	}
	// One fault: only while the other members alone hold all that is
	// stable. A lost disk of a member a majority needed for stable
	// (another lagging behind it) is a second fault, which no group of
	// three survives.
	held := c.held()
	others := 0
	for i, o := range c.m {
		if o != m && held[i] >= w.seq.Stable() {
			others++
		}
	}
	if others < members/2+1 {
		return
	}
	if m.flip = flipBit(w, m.fs, m.dir); m.flip != nil {
		c.storeFlips++
	}
}

// restartMember starts m again on its store, or, refused for a flipped
// bit, on an empty directory beside it.
func (c *simCluster) restartMember(m *member) error {
	fl := m.flip
	m.flip = nil
	err := c.startStandby(m)
	if fl == nil {
		return err
	}
	if !errors.Is(err, replayer.ErrCorrupt) {
		if err != nil {
			return err
		}
		if b, ok := readByte(m.fs, fl.path, fl.off); ok && b == fl.bad {
			c.w.fail("member %d opened its store with a corrupt byte (bit flipped at offset %d of %s), contiguous %d",
				m.id, fl.off, filepath.Base(fl.path), m.sb.Contiguous())
		}
		return nil
	}
	var srcs []standby.Source
	var held uint64
	for _, o := range c.m {
		if o != m && !o.dead && o.sb != nil {
			srcs, held = append(srcs, o.sb), max(held, o.sb.Contiguous())
		}
	}
	if len(srcs) == 0 {
		// No live standby to fetch from: the operator waits for one.
		m.flip, m.upAt = fl, c.w.now+int64(time.Millisecond)
		return nil
	}
	c.movedAside++
	m.dir = fmt.Sprintf("%s.fresh%d", m.dir, c.movedAside)
	if err := c.startStandby(m); err != nil {
		return fmt.Errorf("member %d on an empty directory: %w", m.id, err)
	}
	if err := m.sb.CatchUpFrom(min(c.w.seq.Stable(), held), srcs...); err != nil {
		return fmt.Errorf("member %d on an empty directory: catch-up: %w", m.id, err)
	}
	return nil
}
