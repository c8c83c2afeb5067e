package respio

import (
	"math"
	"strconv"
	"testing"
)

func TestAtoi(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 42, -999999999999999999, 999999999999999999, 1000000000000000000,
		math.MaxInt64, math.MinInt64, -1000000000000000000} {
		got, err := atoi([]byte(strconv.FormatInt(n, 10)))
		if err != nil || got != n {
			t.Errorf("atoi(%d) = %d, %v", n, got, err)
		}
	}
	for _, s := range []string{"", "-", "1x", "x", "9223372036854775808", "-9223372036854775809", "12345678901234567890"} {
		if n, err := atoi([]byte(s)); err == nil {
			t.Errorf("atoi(%q) = %d, want an error", s, n)
		}
	}
}
