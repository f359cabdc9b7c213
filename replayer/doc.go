// Package replayer keeps a session's stream on disk and serves it again:
// the durable session Store (this file's subject), the Reader and
// RewindServer that serve rewinds from it while it grows, and the
// retransmit service and archive reader (OpenArchive) built on it
// (DESIGN.md, "Session and archive").
//
// # Concurrency: Tip and Reader
//
// The Store belongs to one goroutine. Other goroutines read it through
// its Tip (Store.Tip): after each write to a segment file the Store
// publishes, with one atomic store, the active segment's ordinal and
// written offset (and the highest seq held whole before it). A Reader
// (NewReader) opens the segment files read-only, reads each up to the
// published position (every lower segment is complete), checks every
// frame's length, CRC and order, and follows new segments as they roll;
// at the tip it returns an empty run and the caller polls again. Readers
// allocate nothing per frame. A RewindServer runs one Reader per rewind
// connection (docs/protocol.md, "Rewind").
//
// # Service
//
// Service is the replayer process's shell (`seqd replayer`): one
// goroutine follows the stream with the pure receiver (safe mode,
// Persist, the Replayer status flag) over a transport.Client, hands the
// frames it persists to a Persister (pure: it appends a packet once every
// record in it is delivered, in stream order, with no copy when it can go
// at once; packets ahead of a gap wait in a Reorder, with no allocation
// once warm; the cluster's standby persists through a Persister too),
// drives the
// Store's clock and runs its interval fsync on a helper goroutine
// (Config.SyncInShell), and answers NAKs from the Store on a
// transport.Server of its own (naks: the sequencer's Repairer, packets
// sent with the stable they were stored with). Other goroutines read
// Stats, Contiguous and Durable, run code on its goroutine with Do, or
// read the files through the Store's Tip (a RewindServer). Run returns on
// ctx's end or a fatal error (ErrUnrecoverable from the receiver,
// ErrHole, ErrPendingFull, a failed store), having finished the fsync
// under way and closed (fsynced) the Store. docs/protocol.md,
// "Replayers", says who may set what.
//
// # Store
//
// A Store holds one session's stream packets, byte for byte as they were
// published, in append-only segment files in one directory. It implements
// sequencer.RetransmitStore, so the sequencer's repair policy answers NAKs
// from a replayer's Store as from the Core's ring. It adds what a
// replayer needs: Append (which refuses, with a sentinel, a packet that
// is malformed, of another session, a duplicate or past a gap: a Store is
// gap-free), Range by seq, the epoch of each seq (EpochOf, Epochs), the
// highest seq held whole (Contiguous) and the highest made durable
// (Durable), and Records, a walk over the records of a seq range with
// their epochs (how an archive replays an epoch and cuts it exactly).
//
// A Store is a pure-ish library: its only I/O is its files, it has no
// goroutines, locks or timers, and one goroutine uses it at a time. The
// shell drives time with Tick(now), which hands buffered frames to the
// operating system and applies the fsync policy:
//
//   - interval (default): fsync when Config.SyncInterval (1 ms) has passed
//     since the last one, at a Tick, or when Config.SyncBytes (1 MiB) were
//     appended since, at an Append, whichever comes first;
//   - none: never fsync (bytes reach the OS at each Tick and when the
//     write buffer fills: they survive the process, not the machine);
//   - always: fsync after each Append.
//
// An fsync blocks the appending goroutine for as long as the disk takes
// (milliseconds). With Config.SyncInShell the interval policy leaves it
// to the shell instead: the shell asks SyncDue after Tick, takes a
// SyncRequest with StartSync, runs it on a goroutine of its own while
// appends go on, and reports it with FinishSync; Durable advances then.
//
// Sync and Close fsync whatever the policy; Open fsyncs the segments it
// keeps, so Durable starts at Contiguous. A failed write or fsync makes
// the store refuse further appends (ErrFailed): after a failed fsync the
// kernel may have dropped the pages, so nothing since the last good one
// can be trusted.
//
// Appending allocates nothing per packet (it allocates when a segment
// rolls and when the epoch changes); Range, Records, Oldest, Newest and
// EpochOf allocate nothing. Range hands the callee a copy it may patch.
//
// # Recovery
//
// Open reads every segment and checks every frame (checksum, packet
// decoding, session, order), rebuilding the in-memory index and epoch
// table; it returns a Recovery for the caller to log:
//
//   - A torn tail is the end of the newest segment after its last
//     complete frame: a frame that runs past the end of the file, or bytes
//     that are all zero to the end (a crash mid-write). It is cut (the file
//     truncated and fsynced; a newest segment with no complete frame is
//     removed) and reported as a Cut naming the last seq kept. Every
//     complete frame before it is kept.
//   - Anything else that fails a check is corruption (a Corruption naming
//     the file, offset and the first seq not served): the store serves
//     only what comes before it, takes no appends (ErrCorrupt), and leaves
//     the files as they are for inspection. A missing segment in the
//     middle is corruption too.
//
// Range checks each frame's checksum again as it reads it: bytes that
// changed on disk after Open are caught there, recorded the same way
// (Store.Corruption), and never served.
//
// # Archives
//
// OpenArchive opens a session directory read-only: a finished session,
// or the directory a replayer is still writing. It never writes,
// truncates, creates or removes a file (read-only media are fine); a torn
// tail (a frame a writer has not finished) is reported in the Recovery
// but left in place, and a corrupt frame is named with the first seq not
// served; nothing at or past either is served. It reads frames of any
// size up to MaxFramePacketBytes and segments of any size, whatever the
// Config that wrote them. node.Replay runs an archive through a node's
// Handler; `seqd replay` and `seqd tail --archive` read one from the
// command line.
//
// # On-disk format (version 1)
//
// A finished session's directory is an archive: it needs nothing else to
// be read (OpenArchive). All integers are little-endian.
// Checksums are CRC-32C (Castagnoli), as hash/crc32 computes with
// crc32.MakeTable(crc32.Castagnoli).
//
// Files. The directory holds the segments of one session, named by their
// ordinal, 1, 2, ..., zero-padded to ten digits: 0000000001.seg,
// 0000000002.seg, ... Ordinals are consecutive; the first may be above 1
// (old segments removed by hand), a gap after it is corruption. Other
// files are ignored. A segment is rolled (the next ordinal started) when
// the next frame would take it past Config.SegmentBytes; a segment holds
// at least one frame (but an epoch-start segment, below), and a frame
// never spans two segments.
//
// Segment header, 64 bytes at offset 0:
//
//	 0 magic    [8]byte "seqdseg\n"
//	 8 version  u16  1 (FormatVersion); another version is refused
//	10 hdrLen   u16  64; frames start here
//	12 flags    u32  0, or 1 (epoch start, below); others are refused
//	16 session  u64  the session; every packet in the file carries it
//	24 ordinal  u64  equals the file name's
//	32 firstSeq u64  seq of the first record of the first frame
//	40 created  i64  wall clock at creation, ns since the Unix epoch
//	48 epoch    u32  with flag 1: the epoch that starts at firstSeq (not 0);
//	                 else zero
//	52 reserved [8]byte zero
//	60 crc      u32  CRC-32C of bytes 0..59
//
// Frames follow the header back to back, to the end of the file, one per
// stream packet, in publish order:
//
//	 0 crc      u32  CRC-32C of bytes 4 .. 16+length (length, firstSeq and
//	                 the packet)
//	 4 length   u32  packet bytes, wire.PacketHeaderBytes (56) ..
//	                 MaxFramePacketBytes (1 MiB; a reader also refuses
//	                 more than its Config.MaxPacketBytes)
//	 8 firstSeq u64  the packet's firstSeq (a copy: a reader can skip and
//	                 index frames without decoding packets)
//	16 packet   [length]byte  a wire v2 data packet (wire/doc.go), exactly
//	                 as published or received: session, epoch, count,
//	                 firstSeq, stable, baseTime, epochStart, then records
//	                 (seq = firstSeq + index, time, account, instance,
//	                 cmdSeq, flags, fragment total and offset, payload)
//
// Order: each packet's first record follows the previous packet's last
// record: the next seq, or, when that record is a fragment that does not
// end its message, the same seq with the next fragment offset. So packets'
// first and last seqs never decrease and the store holds every seq from
// the oldest to Contiguous.
//
// Epochs are not stored apart: the epoch table is read from the packet
// headers (epoch, epochStart). Epoch e starts at the epochStart carried by
// the first packet of epoch e; a record belongs to the newest epoch
// starting at or before its seq, whatever header carries it (a repair
// resent after a failover). An archive thus replays each epoch and cuts
// it exactly where the next begins.
//
// Epoch restarts. A store may hold packets of a deposed primary past its
// epoch's cut (seqs no quorum held, published just before it lost its
// lease). When epoch e+1 begins at a seq s at or below the newest held,
// its first packet (first record at s, whole or a first fragment) starts
// a new segment whose header's firstSeq is s; the frames of epoch e
// above the cut stay in the earlier segment, as received. This is the
// one place where frames' seqs go back, and only at the start of a
// segment (anywhere else it is corruption). Readers never serve a record
// of a packet of epoch h whose seq is at or above the start of the
// oldest epoch newer than h (the cut), as a live receiver drops it;
// Range skips the packets that hold only such records, and so does a
// Reader (it reads the epoch table the Store publishes with its Tip, and
// takes the new epoch's first packet going back as the restart it is; a
// Reader that already served the deposed primary's packets before the
// new epoch arrived serves the restart next, as the live stream did). So the order rule
// above holds for the records served.
//
// Epoch-start segments. A store that learns where an epoch began without
// that epoch's first packet (a standby that healed onto a later packet of
// the epoch, Store.BeginEpoch) starts a segment whose header has flag 1,
// the epoch and, as firstSeq, the epoch's start s: the epoch table gets
// the row, the records held from s on (a deposed primary's) are cut as
// by a restart, and the segment's first frame, when it has one, starts
// at s. Such a segment may hold no frame (it is kept, not cut as a torn
// tail). Readers that predate the flag refuse it.
//
// Index. The index by seq is not a file: Open rebuilds it while checking
// every frame, and appends extend it. It holds, per segment, its first
// and last packet and one entry (offset, firstSeq) per
// Config.IndexIntervalBytes (4 KiB) of frames, so a lookup is two binary
// searches and a read of at most about that many bytes before the first
// packet served. Memory: 16 bytes per 4 KiB stored (4 MiB per GiB).
//
// Versioning. A change an older reader could misread (a field moved or
// its meaning changed) takes a new version number; a reader refuses
// versions it does not know rather than misreading them. Reserved bytes
// and flags are zero and checked, so a later version can use them.
//
// Resources: each segment holds an open file descriptor while the Store
// is open (8 per GiB at the default 128 MiB segments).
package replayer
