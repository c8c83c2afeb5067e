package engine

// NumKinds bounds the Kind values: every Kind is below it.
const NumKinds = int(KindZSet) + 1
