package replayer

// ArchiveConfig is the Config of OpenArchive: read-only, and large enough
// to read any archive whatever the Config that wrote it (frames of up to
// MaxFramePacketBytes, any segment size). Nothing is preallocated for
// appends.
func ArchiveConfig() Config {
	cfg := DefaultConfig()
	cfg.ReadOnly = true
	cfg.MaxPacketBytes = MaxFramePacketBytes
	cfg.SegmentBytes = 1 << 40
	cfg.WriteBufferBytes = FrameHeaderBytes + MaxFramePacketBytes
	cfg.ReadBufferBytes = 2 * (FrameHeaderBytes + MaxFramePacketBytes)
	return cfg
}

// OpenArchive opens a session directory (a finished session, or one a
// replayer is still writing) to read it, never to change it: no file is
// written, truncated, removed or created, so an archive on read-only
// media and the directory of a live replayer are both safe to read. It
// checks every frame as Open does and reports what it found in the
// Recovery: a torn tail (the end of a segment a writer has not finished,
// or a crash left) is listed in Cuts but left in place, and a corrupt
// frame in Corrupt with the first seq not served; nothing at or past
// either is ever served. The Store serves what was complete when it was
// opened; Append fails with ErrReadOnly.
func OpenArchive(dir string) (*Store, *Recovery, error) {
	return Open(dir, ArchiveConfig())
}

// writeBufferBytes is the write buffer Open allocates: none for a
// read-only store.
func writeBufferBytes(cfg Config) int {
	if cfg.ReadOnly {
		return 0
	}
	return cfg.WriteBufferBytes
}
