package archiver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Report is what one Scan found: a session shipped (Result) or not
// (Err), or one skipped because it is not finished yet.
type Report struct {
	Dir     string
	Result  Result
	Pending bool  // changed within Settle: not finished yet
	Err     error // nil: shipped or already shipped
}

// Sessions is the session directories under source: source itself when
// it holds segment files, else each of its subdirectories that does.
func Sessions(source string) ([]string, error) {
	if segs, err := segments(source); err != nil {
		return nil, err
	} else if len(segs) > 0 {
		return []string{source}, nil
	}
	ents, err := os.ReadDir(source)
	if err != nil {
		return nil, fmt.Errorf("archiver: %w", err)
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		d := filepath.Join(source, e.Name())
		if segs, err := segments(d); err == nil && len(segs) > 0 {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Scan ships every finished session of cfg.Source (unchanged for
// cfg.Settle at now) not shipped already.
func Scan(cfg Config, now time.Time) ([]Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	dirs, err := Sessions(cfg.Source)
	if err != nil {
		return nil, err
	}
	dest := cfg.destDir()
	var out []Report
	for _, d := range dirs {
		r := Report{Dir: d}
		changed, err := lastChange(d)
		switch {
		case err != nil:
			r.Err = err
		case now.Sub(changed) < cfg.Settle:
			r.Pending = true
		case !cfg.Reverify && shippedSince(d, dest, changed):
			// Nothing changed since it was shipped: not read again.
			r.Result.UpToDate = true
		default:
			r.Result, r.Err = Ship(d, dest)
		}
		out = append(out, r)
	}
	return out, nil
}

// Run scans every cfg.Interval until ctx ends, handing each report to
// report (shipped, failed and pending ones alike).
func Run(ctx context.Context, cfg Config, report func(Report)) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		reps, err := Scan(cfg, time.Now())
		if err != nil {
			return err
		}
		for _, r := range reps {
			report(r)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// shippedSince reports whether dir's session has a manifest at dest
// written after changed (the newest change of dir's files), listing the
// same files with the same sizes: then it was shipped, verified, and
// has not changed since, and a scan need not read it again.
func shippedSince(dir, dest string, changed time.Time) bool {
	names, err := segments(dir)
	if err != nil {
		return false
	}
	ents, err := os.ReadDir(dest)
	if err != nil {
		return false
	}
	for _, e := range ents {
		m, err := readManifest(filepath.Join(dest, e.Name()))
		if err != nil || m.Source != dir || !m.ShippedAt.After(changed) || len(m.Files) != len(names) {
			continue
		}
		same := true
		for i, f := range m.Files {
			fi, err := os.Stat(filepath.Join(dir, names[i]))
			if err != nil || f.Name != names[i] || fi.Size() != f.Bytes {
				same = false
				break
			}
		}
		if same {
			return true
		}
	}
	return false
}

// lastChange is the newest modification time of dir's segment files.
func lastChange(dir string) (time.Time, error) {
	names, err := segments(dir)
	if err != nil {
		return time.Time{}, err
	}
	var last time.Time
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil {
			return last, fmt.Errorf("archiver: %w", err)
		}
		if fi.ModTime().After(last) {
			last = fi.ModTime()
		}
	}
	return last, nil
}

// Failed reports whether any report is a failure (not pending).
func Failed(reps []Report) error {
	var errs []error
	for _, r := range reps {
		if r.Err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", r.Dir, r.Err))
		}
	}
	return errors.Join(errs...)
}
