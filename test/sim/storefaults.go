package sim

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

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
	w := r.w
	if !w.cfg.StoreFaults || r.flip != nil {
		return
	}
	dir := filepath.Join(r.dir, "store")
	ents, err := r.fs.ReadDir(dir)
	if err != nil {
		return
	}
	var segs []string
	var sizes []int64
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".seg") {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if sz := fileSize(r.fs, p); sz > replayer.SegmentHeaderBytes+replayer.FrameHeaderBytes {
			segs, sizes = append(segs, p), append(sizes, sz)
		}
	}
	if len(segs) == 0 {
		return
	}
	i := w.rng.IntN(len(segs))
	off := replayer.SegmentHeaderBytes + w.rng.Int64N(sizes[i]-replayer.SegmentHeaderBytes)
	f, err := r.fs.OpenReadWrite(segs[i])
	if err != nil {
		w.fail("store fault: open %s: %v", segs[i], err)
		return
	}
	defer f.Close()
	var b [1]byte
	if _, err := f.ReadAt(b[:], off); err != nil {
		w.fail("store fault: read %s: %v", segs[i], err)
		return
	}
	fl := &storeFlip{path: segs[i], off: off, orig: b[0], bad: b[0] ^ 1<<w.rng.IntN(8)}
	b[0] = fl.bad
	if _, err := f.WriteAt(b[:], off); err != nil {
		w.fail("store fault: write %s: %v", segs[i], err)
		return
	}
	_ = f.Sync()
	r.flip = fl
	r.flips++
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
		if err := r.writeByte(fl.path, fl.off, fl.orig); err != nil {
			return err
		}
		return r.start()
	}
	if err != nil {
		return err
	}
	// It opened: the flipped byte must be gone (a torn tail cut).
	if b, ok := r.readByte(fl.path, fl.off); ok && b == fl.bad {
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

func (r *simReplayer) readByte(p string, off int64) (byte, bool) {
	f, err := r.fs.Open(p)
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

func (r *simReplayer) writeByte(p string, off int64, v byte) error {
	f, err := r.fs.OpenReadWrite(p)
	if err != nil {
		return fmt.Errorf("store fault: restore %s: %w", p, err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte{v}, off); err != nil {
		return fmt.Errorf("store fault: restore %s: %w", p, err)
	}
	return f.Sync()
}
