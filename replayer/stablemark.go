package replayer

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/seqd/seqd/internal/vfs"
)

// StableName is the file that marks a directory whose every record was
// stable when it was stored: a Service's (it stores only stable records,
// but with the headers the stream carried when they were published,
// whose stable lags their records). A cluster member's standby store,
// which holds its unstable tail too, has none. A replay that stops at
// stable (node.ReplayStableOnly) reads a marked archive to its end; it
// stopped at the last header's stable and dropped the records after it
// (half of a finished session's last thousand).
const StableName = "STABLE"

const stableText = "every record in this directory was stable when a seqd replayer stored it\n"

// markStable creates dir's StableName (once; an existing one is kept).
func markStable(fsys vfs.FS, dir string) error {
	f, err := fsys.Create(filepath.Join(dir, StableName), 0o644)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("replayer: mark %s stable: %w", dir, err)
	}
	_, werr := f.WriteAt([]byte(stableText), 0)
	return errors.Join(werr, f.Close())
}

// AllStable reports whether dir is marked as holding only stable records
// (StableName).
func AllStable(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, StableName))
	return err == nil
}
