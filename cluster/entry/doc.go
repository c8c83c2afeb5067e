// Package entry is the codec of the Raft log's entries: one entry is a
// type byte, the leader's clock as a varint (ns), then the type's body.
// A Batch entry is one group-committed batch of engine requests; the
// other types flush, count, change policies, evict, change the slot
// directory (Meta) or step a slot move (Slots).
//
// The bytes are on disk in every log and are what every replica decodes,
// so the types are append-only and an encoding never changes: a new
// field of engine.Request needs a new type (the request encoding carries
// every field, TestRequestEncodingCarriesEveryField). One encoding of
// each type is current; the first batch encoding (type 1, and forwarded
// batches from followers of older builds) is only read, never written,
// so data folders of older versions still open.
//
// Decoding checks what the state machine will trust: the requests of a
// batch are ones the engine's constructors build (engine.ValidateBatch),
// policy definitions parse, directory ops and move steps decode
// (package ownership). A forwarded batch is checked with the same
// decoder before it is appended, because an entry that does not decode
// halts every replica.
//
// # Usage
//
//	b := entry.AppendHeader(nil, entry.Batch, nowNanos)
//	b = binary.AppendUvarint(b, uint64(len(reqs)))
//	b = entry.AppendRequests(b, reqs, nil) // names: nil, or one policy name (or nil) per request
//
//	e, err := entry.Decode(b) // err wraps ErrCorrupt
//	switch e.Type {
//	case entry.Batch:
//		// e.NowNanos, e.Reqs (keys alias b), e.Names, e.NoCreate
//	}
package entry
