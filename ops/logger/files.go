package logger

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// files is the rotating set of log files: it owns the open file and
// its buffer. One goroutine (the node's) uses it.
type files struct {
	cfg  Config
	f    *os.File
	w    *bufio.Writer
	day  string // of the open file ("" with Daily off: the first line's)
	n    int    // the open file's index within its day
	size int64  // bytes in the open file, buffered ones included
}

// name is a file's name: PREFIX-DAY.N.EXT.
func (fs *files) name(day string, n int) string {
	return fmt.Sprintf("%s-%s.%03d%s", fs.cfg.Prefix, day, n, fs.cfg.ext())
}

// write appends line, stamped at time ns (the sequencer's), rotating
// first when the day changed or the file would grow past its limit.
func (fs *files) write(line []byte, ns int64) error {
	day := time.Unix(0, ns).UTC().Format("2006-01-02")
	switch {
	case fs.f == nil:
		if err := fs.open(day); err != nil {
			return err
		}
	case fs.cfg.Daily && day != fs.day:
		if err := fs.rotate(day, 0); err != nil {
			return err
		}
	}
	if fs.cfg.MaxFileBytes > 0 && fs.size > 0 && fs.size+int64(len(line)) > fs.cfg.MaxFileBytes {
		if err := fs.rotate(fs.day, fs.n+1); err != nil {
			return err
		}
	}
	if _, err := fs.w.Write(line); err != nil {
		return fmt.Errorf("logger: write %s: %w", fs.f.Name(), err)
	}
	fs.size += int64(len(line))
	return nil
}

// open opens the newest file of day (a restarted logger appends to
// where it left off), or its first.
func (fs *files) open(day string) error {
	if err := os.MkdirAll(fs.cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("logger: %w", err)
	}
	n := 0
	for _, e := range fs.list() {
		if e.day == day && e.n > n {
			n = e.n
		}
	}
	return fs.openFile(day, n)
}

func (fs *files) openFile(day string, n int) error {
	path := filepath.Join(fs.cfg.Dir, fs.name(day, n))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("logger: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("logger: %w", err)
	}
	fs.f, fs.day, fs.n, fs.size = f, day, n, fi.Size()
	if fs.w == nil {
		fs.w = bufio.NewWriterSize(f, 64<<10)
	} else {
		fs.w.Reset(f)
	}
	return nil
}

// rotate closes the open file and opens day's file n, then removes the
// oldest beyond Keep.
func (fs *files) rotate(day string, n int) error {
	if err := fs.closeFile(); err != nil {
		return err
	}
	if err := fs.openFile(day, n); err != nil {
		return err
	}
	return fs.prune()
}

func (fs *files) flush() error {
	if fs.w == nil || fs.f == nil {
		return nil
	}
	if err := fs.w.Flush(); err != nil {
		return fmt.Errorf("logger: write %s: %w", fs.f.Name(), err)
	}
	return nil
}

func (fs *files) closeFile() error {
	if fs.f == nil {
		return nil
	}
	err := fs.flush()
	if cerr := fs.f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("logger: close: %w", cerr)
	}
	fs.f = nil
	return err
}

type fileEntry struct {
	name string
	day  string
	n    int
}

// list is the log files of Dir, oldest first.
func (fs *files) list() []fileEntry {
	ents, _ := os.ReadDir(fs.cfg.Dir)
	var out []fileEntry
	pre, ext := fs.cfg.Prefix+"-", fs.cfg.ext()
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), pre)
		if !ok || e.IsDir() {
			continue
		}
		rest, ok = strings.CutSuffix(rest, ext)
		if !ok {
			continue
		}
		day, num, ok := strings.Cut(rest, ".")
		n, err := strconv.Atoi(num)
		if !ok || err != nil || n < 0 {
			continue
		}
		if _, err := time.Parse("2006-01-02", day); err != nil {
			continue
		}
		out = append(out, fileEntry{name: e.Name(), day: day, n: n})
	}
	slices.SortFunc(out, func(a, b fileEntry) int {
		if c := strings.Compare(a.day, b.day); c != 0 {
			return c
		}
		return a.n - b.n
	})
	return out
}

// prune removes the oldest files beyond Keep (never the open one).
func (fs *files) prune() error {
	if fs.cfg.Keep == 0 {
		return nil
	}
	l := fs.list()
	for len(l) > fs.cfg.Keep {
		if l[0].day == fs.day && l[0].n == fs.n {
			break
		}
		if err := os.Remove(filepath.Join(fs.cfg.Dir, l[0].name)); err != nil {
			return fmt.Errorf("logger: prune: %w", err)
		}
		l = l[1:]
	}
	return nil
}
