package archiver

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seqd/seqd/replayer"
)

// Manifest describes a shipped session: written last, so its presence
// says the copy is whole and verified.
type Manifest struct {
	Session   uint64    `json:"session"`
	FirstSeq  uint64    `json:"first_seq"`
	LastSeq   uint64    `json:"last_seq"`
	Source    string    `json:"source"`
	ShippedAt time.Time `json:"shipped_at"`
	Files     []FileSum `json:"files"`
}

// FileSum is one file of a session and its SHA-256.
type FileSum struct {
	Name   string `json:"name"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Result is what one Ship did.
type Result struct {
	Session  uint64
	Dir      string // the copy
	LastSeq  uint64
	Files    int
	Bytes    int64
	Copied   int  // files copied this time (0: it was shipped already)
	UpToDate bool // the manifest already matched the source
}

// ManifestName and SumsName are the files Ship writes beside the segments.
const (
	ManifestName = "MANIFEST.json"
	SumsName     = "SHA256SUMS"
)

// Ship copies the session in dir to dest/SESSION and verifies it: each
// file's SHA-256 read back from the copy equals the source's, and the
// copy opens as an archive of the same session and range. It is
// idempotent: a file already there with the right checksum is kept, and
// a session whose manifest matches its source is left alone. A file is
// written under a temporary name, fsynced and renamed, so a crash leaves
// no half file under a segment's name; the manifest comes last.
func Ship(dir, dest string) (Result, error) {
	src, err := inspect(dir)
	if err != nil {
		return Result{}, err
	}
	res := Result{Session: src.Session, LastSeq: src.LastSeq, Files: len(src.Files)}
	res.Dir = filepath.Join(dest, sessionName(src.Session))
	for _, f := range src.Files {
		res.Bytes += f.Bytes
	}
	if old, err := readManifest(res.Dir); err == nil && slices.Equal(old.Files, src.Files) && old.LastSeq == src.LastSeq {
		if err := verifyCopy(res.Dir, src); err == nil {
			res.UpToDate = true
			return res, nil
		}
		// A copy that no longer verifies is shipped again.
	}
	if err := os.MkdirAll(res.Dir, 0o755); err != nil {
		return res, fmt.Errorf("archiver: %w", err)
	}
	for _, f := range src.Files {
		to := filepath.Join(res.Dir, f.Name)
		if sum, n, err := fileSum(to); err == nil && sum == f.SHA256 && n == f.Bytes {
			continue
		}
		if err := copyFile(filepath.Join(dir, f.Name), to, f); err != nil {
			return res, err
		}
		res.Copied++
	}
	if err := verifyCopy(res.Dir, src); err != nil {
		return res, err
	}
	src.ShippedAt = time.Now().UTC()
	if err := writeSums(res.Dir, src); err != nil {
		return res, err
	}
	b, _ := json.MarshalIndent(src, "", "  ")
	if err := writeAtomic(filepath.Join(res.Dir, ManifestName), append(b, '\n')); err != nil {
		return res, err
	}
	return res, syncDir(res.Dir)
}

func sessionName(s uint64) string { return strconv.FormatUint(s, 16) }

// inspect opens dir as an archive (it must open cleanly: no torn tail,
// no corruption) and sums its segment files.
func inspect(dir string) (Manifest, error) {
	names, err := segments(dir)
	if err != nil {
		return Manifest{}, err
	}
	if len(names) == 0 {
		return Manifest{}, fmt.Errorf("%w: %s holds no segment files", ErrNotArchive, dir)
	}
	m, err := openRange(dir)
	if err != nil {
		return m, err
	}
	m.Source = dir
	for _, n := range names {
		sum, size, err := fileSum(filepath.Join(dir, n))
		if err != nil {
			return m, fmt.Errorf("archiver: %w", err)
		}
		m.Files = append(m.Files, FileSum{Name: n, Bytes: size, SHA256: sum})
	}
	// The files must not have changed while they were summed.
	again, err := openRange(dir)
	if err != nil || again.LastSeq != m.LastSeq {
		return m, fmt.Errorf("%w: %s changed while it was read (not finished)", ErrNotArchive, dir)
	}
	return m, nil
}

// openRange opens dir as an archive: its session and the seqs it holds.
func openRange(dir string) (Manifest, error) {
	s, rec, err := replayer.OpenArchive(dir)
	if err != nil {
		return Manifest{}, fmt.Errorf("%w: %s: %v", ErrNotArchive, dir, err)
	}
	defer s.Close()
	if rec != nil && (len(rec.Cuts) > 0 || rec.Corrupt != nil) {
		return Manifest{}, fmt.Errorf("%w: %s has a torn tail or a corrupt frame (%s)", ErrNotArchive, dir, rec)
	}
	m := Manifest{Session: s.Session(), LastSeq: s.Contiguous()}
	if o, ok := s.Oldest(); ok {
		m.FirstSeq = o.FirstSeq
	}
	return m, nil
}

// segments is the segment files of dir, in order.
func segments(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("archiver: %w", err)
	}
	var out []string
	for _, e := range ents {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".seg") {
			out = append(out, e.Name())
		}
	}
	slices.Sort(out)
	return out, nil
}

// verifyCopy reads the copy back: every file's size and SHA-256, and the
// copy as an archive.
func verifyCopy(dir string, src Manifest) error {
	for _, f := range src.Files {
		sum, n, err := fileSum(filepath.Join(dir, f.Name))
		if err != nil {
			return fmt.Errorf("%w: %s: %v", ErrVerify, f.Name, err)
		}
		if sum != f.SHA256 || n != f.Bytes {
			return fmt.Errorf("%w: %s: %d bytes sha256 %s, source %d bytes sha256 %s", ErrVerify, filepath.Join(dir, f.Name), n, sum, f.Bytes, f.SHA256)
		}
	}
	got, err := openRange(dir)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrVerify, err)
	}
	if got.Session != src.Session || got.LastSeq != src.LastSeq || got.FirstSeq != src.FirstSeq {
		return fmt.Errorf("%w: %s opens as session %x seqs %d..%d, source %x %d..%d", ErrVerify, dir,
			got.Session, got.FirstSeq, got.LastSeq, src.Session, src.FirstSeq, src.LastSeq)
	}
	return nil
}

func fileSum(path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}

// copyFile copies from to to through a temporary file, checking the
// bytes written against want.
func copyFile(from, to string, want FileSum) error {
	in, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("archiver: %w", err)
	}
	defer in.Close()
	tmp := to + ".part"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("archiver: %w", err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && (n != want.Bytes || hex.EncodeToString(h.Sum(nil)) != want.SHA256) {
		err = fmt.Errorf("%w: %s changed while it was copied", ErrVerify, from)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("archiver: copy %s: %w", from, err)
	}
	if err := os.Rename(tmp, to); err != nil {
		return fmt.Errorf("archiver: %w", err)
	}
	return nil
}

// writeSums writes SHA256SUMS in sha256sum's format (sha256sum -c reads it).
func writeSums(dir string, m Manifest) error {
	var b strings.Builder
	for _, f := range m.Files {
		fmt.Fprintf(&b, "%s  %s\n", f.SHA256, f.Name)
	}
	return writeAtomic(filepath.Join(dir, SumsName), []byte(b.String()))
}

func writeAtomic(path string, b []byte) error {
	tmp := path + ".part"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("archiver: %w", err)
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("archiver: %w", err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("archiver: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("archiver: sync %s: %w", dir, err)
	}
	return nil
}

func readManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(b, &m)
}
