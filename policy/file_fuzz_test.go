package policy

import (
	"errors"
	"slices"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// FuzzPolicyFile: any file contents either parse or fail with an error
// naming a line, never panic; every policy parsed prints back (String) to a
// line that parses to the same definition, and builds engine requests that
// pass engine.Validate.
func FuzzPolicyFile(f *testing.F) {
	for _, s := range []string{
		"api ALLOW 100 10\nlogin THROTTLE 5 5 60\n# comment\n\nip FIXED 100 60000\n",
		"s SLIDING 10 1000\nl LOG 100000 1\nq SHAPE 3 0.1\n",
		"a allow 1 1e-9\nb ALLOW 1152921504606846976 1\n",
		"x ALLOW 10\ny NOPE 1 2\ncost ALLOW 1 1\n",
		"dup ALLOW 1 1\ndup ALLOW 2 2\n",
		"g THROTTLE 0 1 999999999999.9\nh FIXED 9223372036854775807 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ps, err := Read("fuzz", b)
		if err != nil {
			var le *LineError
			if !errors.As(err, &le) || le.Line < 1 {
				t.Fatalf("error without a line: %v", err)
			}
			return
		}
		for _, p := range ps {
			again, err := Read("again", []byte(p.String()+"\n"))
			if err != nil || len(again) != 1 || !slices.Equal(again[0].Words(), p.Words()) {
				t.Fatalf("%q does not read back: %v, %v", p.String(), again, err)
			}
			for _, cost := range []int64{0, 1, 3} {
				r := p.Request([]byte("k"), cost)
				if err := engine.Validate(&r); err != nil {
					t.Fatalf("%q cost %d: request does not validate: %v", p.String(), cost, err)
				}
			}
		}
	})
}
