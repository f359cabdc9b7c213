// Package archiver is the archiver node (`seqd archiver`): it ships each
// finished session's archive (the segment directory a replayer wrote) to
// a destination directory, or an object store mounted as one, and
// verifies the copy.
//
// A session is finished when its segment files have not changed for
// Config.Settle (its replayer moved on to a new session directory, or
// stopped) and it opens as a clean archive (no torn tail, no corrupt
// frame). Ship copies each segment file through a temporary name
// (fsynced, then renamed), reads the copy back and compares every
// file's SHA-256 and size with the source's, opens the copy as an
// archive and checks its session and range, and writes SHA256SUMS
// (sha256sum -c reads it) and MANIFEST.json last: a manifest means a
// whole, verified copy. Re-runs are idempotent: a session whose
// manifest and files match is left alone, and a file already there with
// the right checksum is not copied again; a copy that no longer
// verifies is shipped again. A Scan does not read a session again when
// a manifest written after its files last changed lists them with their
// sizes (Config.Reverify reads and checks everything each time).
//
// Main types: Config, Manifest, Result and Report; Ship (one session),
// Scan (every finished session of a source) and Run (Scan each
// Interval).
//
// # Concurrency
//
// Ship and Scan run on the caller's goroutine and touch only the files
// they are given; run one archiver per destination. Run returns when
// its ctx ends, between scans.
package archiver
