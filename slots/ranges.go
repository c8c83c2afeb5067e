package slots

// Run is a range of consecutive slots with one owner.
type Run[T comparable] struct {
	Start, End int // inclusive
	Owner      T
}

// Runs turns a slot-to-owner map into its runs of consecutive slots with
// the same owner, in slot order. Slots whose owner is none are left out:
// pass the owner type's zero value for "unassigned".
func Runs[T comparable](owners *[Count]T, none T) []Run[T] {
	var out []Run[T]
	for s := 0; s < Count; {
		o := owners[s]
		e := s
		for e+1 < Count && owners[e+1] == o {
			e++
		}
		if o != none {
			out = append(out, Run[T]{Start: s, End: e, Owner: o})
		}
		s = e + 1
	}
	return out
}
