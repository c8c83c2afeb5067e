package engine

import "context"

// NumKinds bounds the Kind values: every Kind is below it.
const NumKinds = int(KindShape) + 1

// CountKinds counts the keys whose state is not empty at nowNanos, by kind
// (index Kind; KindNone stays 0). Scaled token buckets and queues
// (Request.Scaled) count as KindGCRA and KindShape. It walks every shard's table on the
// shard's goroutine, like Len: O(keys), for metrics scraped now and then,
// not for the request path.
func (e *Engine) CountKinds(ctx context.Context, nowNanos int64) ([NumKinds]int, error) {
	per := make([][NumKinds]int, len(e.shards))
	err := e.onEach(ctx, func(i int, s *shard) { per[i] = s.countKinds(nowNanos) })
	var total [NumKinds]int
	for _, p := range per {
		for k, n := range p {
			total[k] += n
		}
	}
	return total, err
}
