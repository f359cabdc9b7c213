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
