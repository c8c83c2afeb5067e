// Package raftlog is Raft's log and stable store on disk: append-only
// segment files for the log, one small file for the stable store. It
// implements hashicorp/raft's LogStore, MonotonicLogStore and StableStore.
// A Store holds one group's log in a folder of its own; a Shared log
// holds every group of a process in one log, with shared fdatasyncs
// (Shared log, below).
//
// It replaces raft-boltdb, where every StoreLogs was a bbolt transaction:
// two fdatasyncs (data pages, then the meta page), scattered page writes,
// page allocation and a freelist rewritten on every commit. Here a
// StoreLogs is one write at the end of a file and one fdatasync.
//
// # Log
//
// The log is a sequence of segment files in the store's folder, named
// log-<index of their first record, 20 digits>.seg, each a sequence of
// records, one per raft.Log, all little-endian:
//
//	length   uint32  bytes after the header (29 + len(Data) + len(Extensions))
//	crc      uint32  CRC-32C (Castagnoli) of those bytes
//	index    uint64
//	term     uint64
//	appended int64   AppendedAt in Unix nanoseconds; 0 is the zero time.Time
//	type     uint8   raft.LogType
//	dataLen  uint32
//	data     dataLen bytes
//	ext      the rest: Extensions
//
// Empty Data and Extensions read back as nil. An AppendedAt of exactly
// the Unix epoch reads back as the zero time.
//
// Indexes are consecutive, within a segment and across segments: a
// StoreLogs must continue LastIndex+1, except into an empty log (a new
// store, or one whose entries were all deleted), which may start at any
// index (after a snapshot install Raft stores index N+1 into a wiped
// log). That is why the store says it is monotonic: Raft then deletes
// the whole log after installing a snapshot instead of leaving a gap.
// A StoreLogs goes to the last segment until that segment reaches
// Options.SegmentSize; the next one starts a new segment (created, then
// the folder fsynced).
//
// A segment's file runs ahead of its records: when a write would pass
// its end, StoreLogs first extends it with zeros to the next MiB (synced
// with the records, by the same fdatasync). Most writes then overwrite
// blocks the file already has, and their fdatasync writes the data alone;
// a write that grows the file makes it write the inode too (ext4 on the
// development machine: 122-134 us per 12 KiB synced write in place
// against 205 us appending). A zero header where a record would start is
// the end of a segment's records. Open cuts the last segment's zeros (and
// anything after them), Close does too, and so does starting a new
// segment for the one before it; a full disk that refuses the zeros only
// means the records are appended without them.
//
// In memory each segment keeps its open file and the offset of each
// record (8 bytes per entry): GetLog is one ReadAt of a known range, a
// CRC check and a decode. Readers share a sync.RWMutex with the writer,
// which holds it only to publish what it wrote and synced, so GetLog
// never waits for an fdatasync.
//
// # Writes that fail
//
// A write or fdatasync that fails (ENOSPC, EIO) leaves the store as it
// was: the segment is truncated back to its last good size (and synced)
// before the error is returned, and nothing in memory changes. If even
// that truncation fails, it is redone before the next write, so a partial
// record never ends up between good ones. After a failed fdatasync the
// written bytes may still reach the disk: a crash then can bring back
// records whose StoreLogs returned an error, as after a crash between a
// write and its acknowledgement; Raft handles that.
//
// # Deleting
//
// Raft deletes from the front after a snapshot, from the back when a
// follower's log conflicts with its leader's, and the whole log after
// installing a snapshot. DeleteRange accepts only those three shapes
// (ranges reaching past either end are clamped); one that would leave a
// gap is refused.
//
//   - From the front: the new first index is written to the stable file
//     (below), then the segments lying wholly before it are removed. A
//     partly covered segment stays on disk, and the first index hides
//     its deleted records, after a restart too.
//   - The whole log: the stable file's first index is set to LastIndex+1,
//     hiding every record, then every segment is removed. If the next
//     StoreLogs starts below that index, the first index is cleared first.
//     The log is emptied even when a step fails (the error is returned):
//     Raft does not retry this deletion, and a log left in place would
//     refuse the appends that follow the snapshot.
//   - From the back: later segments are removed (newest first), the folder
//     synced, then the segment holding the first deleted record is
//     truncated at it and synced, so a crash cannot bring the deleted
//     records back once DeleteRange has returned.
//
// # Open
//
// Open reads every segment, checking every record, up to a zero header
// (preallocated space) or the file's end. A torn tail in the last
// segment (a short header or body, an impossible length, a CRC mismatch)
// is a write that was never acknowledged: it is truncated away, and so
// is everything past the last good record of the last segment, zeros
// included, so that no byte of an unfinished write can stay behind zeros
// that later records overwrite. A bad record is torn only when no valid
// record follows it, or when a whole 512-byte sector between it and the
// next valid record is zeros (a sector of the final write that never
// reached the disk, later ones having); a bad record followed by a valid
// one with no sector lost is damage (a flipped bit), never cut: cutting
// it would drop acknowledged records. Damage, a bad record in an earlier
// segment, a record whose CRC is right but whose index is not the next
// one, or segments whose indexes do not follow on, make Open fail with
// the file and offset: the store does not start on a damaged log, and
// the replica is rebuilt from the others (docs/cluster.md). Segments lying wholly before the
// stored first index (a deletion interrupted by a crash) are removed.
//
// # Stable store
//
// The stable file ("stable") holds the key/value pairs Raft keeps (its
// term and vote) and the log's first index. It has two slots of equal
// size (4 KiB each, grown when the contents do not fit); each write goes
// to the older slot, in place, and is synced:
//
//	seq      uint64  the write's number; the valid slot with the higher one wins
//	length   uint32  bytes of payload
//	crc      uint32  CRC-32C of seq, length and payload
//	payload  first uint64, count uint32, then count times
//	         keyLen uint32, key, valLen uint32, value (keys sorted)
//
// A torn write leaves the other slot intact. Writing in place needs no
// new disk space, which matters: hashicorp/raft panics when it cannot
// store a new term, and a node whose disk is full still receives new
// terms from the others. A file rewritten whole (a temporary file, then a
// rename) would need a free block on a full disk. The file is created,
// and grown, through a temporary file and a rename.
//
// Get and GetUint64 of a missing key return ErrKeyNotFound, whose text is
// "not found": hashicorp/raft compares the text. SetUint64 stores 8 bytes
// big-endian, as raft-boltdb does.
//
// # Deferred syncs
//
// Append writes records as StoreLogs does but returns before the
// fdatasync: they are in the log at once (GetLog, LastIndex, the next
// write continues them), and Durable, the last index known synced, stays
// below them until a Sync (or a StoreLogs, whose fdatasync covers the
// whole file) returns. Sync runs its fdatasync outside the writers' lock,
// so appends go on meanwhile. Only the last segment can hold records not
// synced: a write that starts a new segment first syncs the one before.
// A back deletion during a Sync keeps that Sync from raising Durable
// (the indexes it covered may hold other records by then). Open syncs
// the last segment, since a process that crashed may have left records
// in the page cache that were never synced.
//
// A failed fdatasync of records already in the log breaks the store:
// Linux may drop the dirty pages it could not write and report success
// to a later fdatasync, so nothing after it tells what is on disk. Every
// write then fails with ErrSyncFailed until the store is opened again,
// which reads what the disk holds. (A failed fdatasync of StoreLogs' own
// records, with none appended before them, is undone as before.)
//
// The cluster appends a leader's command entries this way, in parallel
// with their replication (cluster/durable.go says what keeps that safe).
//
// # Shared log
//
// A process that hosts several Raft groups opens one Shared log and
// gives each group its GroupLog, which is that group's LogStore and
// StableStore (ExampleShared). The cluster does so in every process
// (cluster.OpenLog; a one-group node opens its own), and reads a Store
// only to convert a folder an earlier version wrote:
//
//	wal, err := raftlog.OpenShared(dir, raftlog.Options{})
//	users, err := wal.Group(1) // the same value for the same id
//	r, err := raft.NewRaft(conf, fsm, users, users, snaps, trans)
//	...
//	wal.Groups()  // after a restart: the groups that hold entries or keys
//	wal.Drop(1)   // a replica moved away: its entries and keys deleted
//	wal.Close()   // after every group's Raft has shut down
//
// GroupLog has Store's methods, each for its group alone: StoreLogs,
// GetLog, FirstIndex, LastIndex, DeleteRange (the three shapes above),
// Append, Sync and Durable (Deferred syncs, above), Set, Get, SetUint64
// and GetUint64. Its indexes are its own: groups' entries interleave in
// the files, and each group's run without a gap.
//
// The files are wal-<seq of their first record, 20 digits>.seg, each a
// sequence of records, all little-endian:
//
//	length   uint32  bytes after the header
//	crc      uint32  CRC-32C (Castagnoli) of those bytes
//	seq      uint64  the record's number: 1, 2, 3... across every file
//	group    uint32
//	kind     uint8   what the payload is (never renumbered):
//	payload  1 entry: index, term, appended, type, dataLen, data, ext
//	           (a Store's record body, above): puts the group's entry
//	         2 front: first uint64: deletes the group's entries below it
//	         3 back: lo uint64: deletes the group's entries from lo on
//	           (0: all of them)
//	         4 key: keyLen uint32, key, value: sets a stable key
//	         5 drop: nothing: deletes the group's entries and keys
//
// Every record changes its group by index alone, never relative to what
// came before, and the last record for an index or key wins. That is
// what lets old files go (Reclaiming, below): replaying what is left
// gives the same logs as replaying everything.
//
// Group commit. A writing call queues its records. Append writes every
// queued record, all groups', in one write, and returns. StoreLogs,
// DeleteRange, Set and Drop wait for the sync: one caller leads, writes
// everything queued in one write and fdatasyncs it outside the writer's
// lock (appends go on meanwhile); the callers that arrive during that
// sync queue, and are all written and synced by the next one. When a
// sync ends, every caller it covered returns at once, and the next
// leader yields once before it takes the queue, so that they can queue
// their next writes for it. fdatasyncs run one at a time. A group's
// Durable rises when a sync covers its entries, whichever group's call
// led it. On the development machine (2 cores), 256-byte entries from
// one goroutine per group (BenchmarkSharedAppend): 1, 3 and 9 groups
// took 1.0, 0.34 and 0.12 fdatasyncs per StoreLogs and 110-165, 52-60
// and 18-21 us per StoreLogs, against 1.0 and 105-195, 115-125 and
// 53-64 us with a Store per group.
//
// In memory each group keeps where each of its entries lies (16 bytes
// per entry) and its keys' values; GetLog is one ReadAt, a CRC check and
// a decode, and never waits for an fdatasync. A deletion is a record,
// synced before DeleteRange returns; the deleted entries' bytes stay in
// their files until those files are reclaimed.
//
// Reclaiming. A segment goes once no group needs its records: files go
// from the oldest only, since a deletion record lies after the entries it
// deletes. Each segment counts its live bytes (entries inside their
// group's log, current key values). The oldest goes when nothing in it
// is live; when its live records are few (at most a quarter of it) or
// the files pass twice the live bytes plus two segments, they are first
// rewritten forward into the segment being written (same bytes, a new
// seq), synced, and then the file is removed and the folder synced. A
// group that lags far behind (an idle one, or one that rarely snapshots)
// therefore costs a copy of its few records each time their segment is
// the oldest, instead of keeping every later file alive; rewriting was
// chosen over bounding the lag because the log store can neither fail a
// group's appends nor force its snapshot (shared_reclaim.go says more).
// It runs in the background after a segment is started or a group's
// front is deleted; Reclaim runs it and waits.
//
// Open reads every file, checking every record as Open does a Store's,
// and replays it into the groups' indexes. The torn-tail rule is the
// Store's, by seq instead of index: a short, zeroed or garbled final
// write in the last file is cut; a bad record followed by a valid one
// with no whole sector of zeros between them is damage, and so is any
// bad record in an earlier file, a record whose CRC is right but whose
// seq or fields are wrong, files whose seqs do not follow on, or a gap
// left in a group's entries. OpenShared then fails with the file, the
// offset and the group (as the record says, "unchecked" when its CRC
// is wrong), and changes nothing. A folder holding a Store's files is
// refused with ErrNotShared.
//
// Failures are the Store's: a write that fails is cut back and its
// callers fail, nothing changed; a failed fdatasync breaks the log for
// every group (ErrSyncFailed) until it is opened again. Keys in the
// shared log need room in it: Set on a full disk fails where a Store's
// stable file, written in place, does not (hashicorp/raft panics when it
// cannot store a term). The preallocated zeros (1 MiB ahead) leave room
// for many; a group may keep a Store's stable file instead.
//
// Options.Hooks are called around each fdatasync of a segment, with the
// range of the last segment it makes durable: the records of every group
// written since the last sync.
//
// # NoSync
//
// Options.NoSync skips every fdatasync and fsync, of files and of the
// folder: for tests only. A crash (of the machine, not the process) can
// then lose acknowledged writes, and a deletion can come back in part
// after it, which Open may refuse as a damaged log.
package raftlog
