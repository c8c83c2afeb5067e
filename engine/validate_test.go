package engine

import "testing"

func TestValidate(t *testing.T) {
	must := func(r Request, err error) Request {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	k := []byte("k")
	for _, r := range []Request{
		must(TokenBucket(k, 10, 1, 1)), must(TokenBucket(k, 1, 1e9, 0)),
		must(Throttle(k, 5, 10, 60e9, 1)), must(GCRA(k, 5, 10, 60, 1)),
		must(Fixed(k, 10, 1000, 1)), must(Sliding(k, MaxLimit, 1, 2)), must(Log(k, MaxLogLimit, 1000, 3)),
		must(Shape(k, 10, 100, 0)), {Op: OpDel}, {Op: OpExists}, {Op: OpTTL},
	} {
		if err := Validate(&r); err != nil {
			t.Errorf("constructor output %+v refused: %v", r, err)
		}
	}
	for _, r := range []Request{
		{Op: 0}, {Op: 200, Limit: 1, Interval: 1},
		{Op: OpGCRA, Interval: 0, Limit: 1}, {Op: OpGCRA, Interval: 1, Limit: 0},
		{Op: OpGCRA, Interval: 2, Limit: MaxDuration}, {Op: OpShape, Interval: 1, Limit: 1, Cost: -1},
		{Op: OpFixed, Limit: 10}, {Op: OpSliding, Limit: 0, Window: 1}, {Op: OpFixed, Limit: MaxLimit + 1, Window: 1},
		{Op: OpLog, Limit: MaxLogLimit + 1, Window: 1}, {Op: OpLog, Limit: 1, Window: MaxDuration + 1},
	} {
		if err := Validate(&r); err != ErrBadRequest {
			t.Errorf("Validate(%+v) = %v, want ErrBadRequest", r, err)
		}
	}
}
