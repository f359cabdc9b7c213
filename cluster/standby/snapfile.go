package standby

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"path/filepath"

	"github.com/seqd/seqd/internal/vfs"
)

// The State's snapshot on disk (issue 14, item 13: a standby reopening
// its store rebuilt the State from seq 1, so its restart time grew with
// the session). Every SnapshotEveryRecords the Core keeps a snapshot in
// memory (for a Takeover or a heal below the State) and also writes it
// beside the store; a Core that opens the store restores the newest file
// that still describes the store's prefix and applies only the records
// after it.
//
// Two files are written in turn, so a torn or lost write leaves the
// other one whole (vfs has no rename; Create refuses an existing name,
// so a file is removed and created again). A file is believed only when
// its CRC holds, its session is the store's, the store holds its seq
// whole, and the store's record at that seq is of the epoch the file
// names: a store is cut only at an epoch's start and what follows the
// cut comes from a newer epoch, so a snapshot of records a cut dropped
// names an older epoch than the store's record at its seq (or the store
// ends below it). A rebuild of the State below a file's seq (a heal, a
// late KnowEpoch, a Takeover at a lower cut) removes the files anyway.
// Nothing is fsynced: a file lost in a power cut costs a longer rebuild,
// never a wrong State.

var snapFileNames = [2]string{"standby-state.0.snap", "standby-state.1.snap"}

const (
	snapFileMagic   = 0x4e535153 // "SQSN"
	snapFileVersion = 1
	// snapHeaderBytes: magic u32, version u16, reserved u16, session
	// u64, seq u64, epoch u32, snapshot length u32, CRC-32C u32 (of the
	// header before it and the snapshot).
	snapHeaderBytes = 36
	// maxSnapFileBytes bounds what a reopen reads.
	maxSnapFileBytes = 1 << 30
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errSnapFile is why a snapshot file is not believed (logged, then the
// State is rebuilt as before).
var errSnapFile = errors.New("standby: state snapshot file")

type diskSnap struct {
	session, seq uint64
	epoch        uint32
	snap         []byte
}

func encodeSnapFile(d diskSnap) []byte {
	b := make([]byte, snapHeaderBytes+len(d.snap))
	le := binary.LittleEndian
	le.PutUint32(b[0:], snapFileMagic)
	le.PutUint16(b[4:], snapFileVersion)
	le.PutUint64(b[8:], d.session)
	le.PutUint64(b[16:], d.seq)
	le.PutUint32(b[24:], d.epoch)
	le.PutUint32(b[28:], uint32(len(d.snap)))
	copy(b[snapHeaderBytes:], d.snap)
	crc := crc32.Update(crc32.Checksum(b[:32], castagnoli), castagnoli, b[snapHeaderBytes:])
	le.PutUint32(b[32:], crc)
	return b
}

func decodeSnapFile(b []byte) (diskSnap, error) {
	le := binary.LittleEndian
	if len(b) < snapHeaderBytes {
		return diskSnap{}, fmt.Errorf("%w: %d bytes, shorter than its header", errSnapFile, len(b))
	}
	if le.Uint32(b[0:]) != snapFileMagic || le.Uint16(b[4:]) != snapFileVersion {
		return diskSnap{}, fmt.Errorf("%w: not a version %d snapshot", errSnapFile, snapFileVersion)
	}
	n := le.Uint32(b[28:])
	if uint64(len(b)) != snapHeaderBytes+uint64(n) {
		return diskSnap{}, fmt.Errorf("%w: %d bytes, the header says %d", errSnapFile, len(b), snapHeaderBytes+uint64(n))
	}
	if crc := crc32.Update(crc32.Checksum(b[:32], castagnoli), castagnoli, b[snapHeaderBytes:]); crc != le.Uint32(b[32:]) {
		return diskSnap{}, fmt.Errorf("%w: CRC mismatch", errSnapFile)
	}
	d := diskSnap{session: le.Uint64(b[8:]), seq: le.Uint64(b[16:]), epoch: le.Uint32(b[24:])}
	d.snap = append([]byte(nil), b[snapHeaderBytes:]...)
	return d, nil
}

// snapFS is the file system of the store's directory.
func (c *Core) snapFS() vfs.FS { return snapFSOf(c.cfg) }

func snapFSOf(cfg Config) vfs.FS {
	if cfg.Store.FS != nil {
		return cfg.Store.FS
	}
	return vfs.Default
}

func readSnapFile(fsys vfs.FS, path string) (diskSnap, error) {
	f, err := fsys.Open(path)
	if err != nil {
		return diskSnap{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return diskSnap{}, err
	}
	if st.Size() > maxSnapFileBytes {
		return diskSnap{}, fmt.Errorf("%w: %d bytes", errSnapFile, st.Size())
	}
	b := make([]byte, st.Size())
	if _, err := f.ReadAt(b, 0); err != nil {
		return diskSnap{}, err
	}
	return decodeSnapFile(b)
}

// loadDiskSnap is the newest snapshot file that describes the store's
// prefix (ok false when none does); rejected lists why the others were
// not believed.
func (c *Core) loadDiskSnap() (best diskSnap, ok bool, rejected []error) {
	fsys := c.snapFS()
	for i, name := range snapFileNames {
		d, err := readSnapFile(fsys, filepath.Join(c.cfg.Dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err == nil {
			err = c.checkDiskSnap(d)
		}
		if err != nil {
			rejected = append(rejected, fmt.Errorf("%s: %w", name, err))
			continue
		}
		c.diskSeq[i] = d.seq
		if !ok || d.seq > best.seq {
			best, ok = d, true
			c.diskNext = 1 - i // the next write replaces the older file
		}
	}
	return best, ok, rejected
}

// checkDiskSnap says why d does not describe the store's prefix (nil
// when it does).
func (c *Core) checkDiskSnap(d diskSnap) error {
	s := c.store
	if d.session != s.Session() || d.session == 0 {
		return fmt.Errorf("%w: session %d, the store's %d", errSnapFile, d.session, s.Session())
	}
	if d.seq == 0 || d.seq > s.Contiguous() {
		return fmt.Errorf("%w: at seq %d, the store holds up to %d", errSnapFile, d.seq, s.Contiguous())
	}
	if e, ok := s.EpochOf(d.seq); !ok || e != d.epoch {
		return fmt.Errorf("%w: seq %d of epoch %d, the store's of epoch %d (cut since)", errSnapFile, d.seq, d.epoch, e)
	}
	return nil
}

// writeDiskSnap writes the snapshot sn of the State over the older of
// the two files. A failure is logged by the caller's stats only: the
// in-memory snapshot is what a Takeover uses.
func (c *Core) writeDiskSnap(sn stateSnap) {
	if c.taken || sn.seq == 0 {
		return
	}
	e, ok := c.store.EpochOf(sn.seq)
	if !ok {
		return
	}
	b := encodeSnapFile(diskSnap{session: c.store.Session(), seq: sn.seq, epoch: e, snap: sn.snap})
	i := c.diskNext
	fsys := c.snapFS()
	path := filepath.Join(c.cfg.Dir, snapFileNames[i])
	c.diskSeq[i] = 0
	if err := fsys.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		c.stats.SnapshotWriteErrs++
		return
	}
	f, err := fsys.Create(path, 0o644)
	if err != nil {
		c.stats.SnapshotWriteErrs++
		return
	}
	_, werr := f.WriteAt(b, 0)
	if cerr := f.Close(); werr != nil || cerr != nil {
		c.stats.SnapshotWriteErrs++
		_ = fsys.Remove(path)
		return
	}
	c.diskSeq[i], c.diskNext = sn.seq, 1-i
	c.stats.SnapshotsWritten++
}

// dropDiskSnapsAbove removes the snapshot files of a seq above seq: the
// State was rebuilt below them, and the store may be cut there.
func (c *Core) dropDiskSnapsAbove(seq uint64) {
	fsys := c.snapFS()
	for i, s := range c.diskSeq {
		if s > seq {
			_ = fsys.Remove(filepath.Join(c.cfg.Dir, snapFileNames[i]))
			c.diskSeq[i] = 0
		}
	}
}
