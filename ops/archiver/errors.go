package archiver

import "errors"

var (
	// ErrConfig: a Config field is out of range; the error names it.
	ErrConfig = errors.New("archiver: bad config")
	// ErrNotArchive: a directory holds no session (no segment files), or
	// one that does not open cleanly as an archive.
	ErrNotArchive = errors.New("archiver: not a session archive")
	// ErrVerify: a copy does not match its source (size, checksum, or
	// the archive it opens as).
	ErrVerify = errors.New("archiver: copy does not verify")
)
