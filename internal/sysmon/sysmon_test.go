package sysmon

import (
	"slices"
	"testing"
)

func TestWithSetting(t *testing.T) {
	for _, tc := range []struct {
		in   []string
		want []string // nil: left as it is
	}{
		{[]string{"PATH=/bin"}, []string{"GODEBUG=" + Setting, "PATH=/bin"}},
		{[]string{"GODEBUG=", "A=1"}, []string{"GODEBUG=" + Setting, "A=1"}},
		{[]string{"A=1", "GODEBUG=madvdontneed=1", "B=2"}, []string{"GODEBUG=madvdontneed=1," + Setting, "A=1", "B=2"}},
		// The runtime reads the first GODEBUG; a later one is dropped.
		{[]string{"GODEBUG=x=1", "GODEBUG=schedtrace=5"}, []string{"GODEBUG=x=1," + Setting}},
		{[]string{"GODEBUG=schedtrace=0"}, nil},
		{[]string{"GODEBUG=gctrace=1,schedtrace=1000", "A=1"}, nil},
		{[]string{"XGODEBUG=schedtrace=0"}, []string{"GODEBUG=" + Setting, "XGODEBUG=schedtrace=0"}},
	} {
		got, ok := withSetting(tc.in)
		if ok != (tc.want != nil) || !slices.Equal(got, tc.want) {
			t.Errorf("withSetting(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}
