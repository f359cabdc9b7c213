// Package replayer keeps a session's stream on disk and serves it again
// (DESIGN.md, "Session and archive"): it stores every stable stream
// packet, byte for byte as published, answers NAKs for what the
// sequencer's retransmit ring no longer holds, serves rewinds ("everything
// from seq N") while the store grows, and opens finished sessions as
// archives.
//
// # Main types
//
//   - Store: one session's packets in append-only segment files in one
//     directory. It is gap-free (Append refuses, with a sentinel, a packet
//     that is malformed, of another session, a duplicate or past a gap)
//     and implements sequencer.RetransmitStore, so NAKs are answered from
//     it with the sequencer's repair policy. Range, Records, EpochOf,
//     Contiguous (held whole) and Durable (fsynced) read it. Open checks
//     every frame and returns a Recovery to log: a torn tail is cut, a
//     corruption is named and nothing at or past it is served. Tick(now)
//     applies the fsync policy (Config.Sync: interval, the default, none
//     or always); a failed write or fsync refuses further appends
//     (ErrFailed).
//   - Tip, Reader and RewindServer: the Store publishes its Tip with one
//     atomic store after each write; a Reader follows the segment files
//     up to it, read-only, checking every frame; a RewindServer runs one
//     Reader per rewind connection. SendRange is the one loop that
//     streams a range of stored packets to a connection (chunks written
//     whole within a deadline, the end or error frame, the wait at the
//     tip): rewinds use it with a Reader, and cluster.PeerServer's
//     fetches with a standby's store read under its lock.
//   - Service: the `seqd replayer` shell. It follows the stream with the
//     pure receiver (safe mode, Persist), appends each packet once every
//     record in it is delivered, in stream order (packets ahead of a gap
//     wait in a Reorder, the bounded buffer the cluster's standby uses
//     too), and answers NAKs on a transport.Server of its own.
//   - OpenArchive: a session directory opened read-only (finished or still
//     being written); it never writes, truncates or removes a file.
//     node.Replay, `seqd replay` and `seqd tail --archive` read it.
//
// # Concurrency
//
// A Store has no goroutines, locks or timers and is used by one goroutine
// at a time; its only I/O is its files, through Config.FS (an
// internal/vfs.FS: the disk unless a test or the simulator names a
// vfs.MemFS or an errorfs). Other goroutines read the files
// through its Tip (Readers). With Config.SyncInShell the interval fsync
// runs on a goroutine of the shell (SyncDue, StartSync, FinishSync) while
// appends go on. A Service runs one goroutine (plus that fsync helper);
// Stats, Contiguous and Durable may be called from any goroutine, and Do
// runs code on the Service's goroutine. Run returns on ctx's end or a
// fatal error (ErrUnrecoverable, ErrHole, ErrPendingFull, a failed
// store), after closing (fsyncing) the Store.
//
// Appending allocates nothing per packet (only when a segment rolls or
// the epoch changes); Range, Records, Oldest, Newest, EpochOf and a
// Reader's frames allocate nothing.
//
// The Store, Service, recovery, archives and the on-disk format
// (version 1, segments, frames, epoch restarts, the index):
// docs/replayer.md. What a replayer stores and who may set what:
// docs/protocol.md, "Replayers".
package replayer
