package engine

// NumKinds bounds the Kind values: every Kind is below it.
const NumKinds = int(KindSet) + 1

// Kinds lists the kinds a key can show (Record.Kind, TYPE, Usage.Keys), in
// order: the limiter kinds, then the data kinds.
var Kinds = []Kind{KindGCRA, KindFixed, KindSliding, KindLog, KindShape, KindString, KindHash, KindZSet, KindList, KindSet}
