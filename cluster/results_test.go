package cluster

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// fillFields sets every field of the struct v points to a distinct non-zero
// value, and fails on a field type it does not know, so that a new field of
// a new type is noticed too.
func fillFields(t *testing.T, v reflect.Value, rng *rand.Rand) {
	t.Helper()
	v = v.Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint8, reflect.Uint16:
			f.SetUint(uint64(1 + rng.IntN(200)))
		case reflect.Int64:
			x := rng.Int64()
			if rng.IntN(2) == 0 {
				x = -x
			}
			f.SetInt(x)
		case reflect.Slice:
			if f.Type().Elem().Kind() != reflect.Uint8 {
				t.Fatalf("field %s: unhandled slice type %s", name, f.Type())
			}
			b := make([]byte, 1+rng.IntN(40))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			f.SetBytes(b)
		case reflect.String:
			b := make([]byte, 1+rng.IntN(40))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			f.SetString(string(b))
		case reflect.Interface:
			// Result.Err: set separately; Request.Cmd: OpCmd only.
		default:
			t.Fatalf("field %s: unhandled kind %s: teach the encoding (and this test) about it", name, f.Kind())
		}
	}
}

// TestResultEncodingCarriesEveryField: the same for forwarded results.
func TestResultEncodingCarriesEveryField(t *testing.T) {
	want := []string{"Err", "Allowed", "Limit", "Remaining", "RetryAfter", "ResetAfter", "Delay", "Queued", "Value", "Kind", "Reply"}
	var got []string
	rt := reflect.TypeOf(engine.Result{})
	for i := range rt.NumField() {
		got = append(got, rt.Field(i).Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("engine.Result fields are %v; the forward encoding carries %v: extend appendResult/decoder.result", got, want)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var res []engine.Result
	for i := range 50 {
		var r engine.Result
		fillFields(t, reflect.ValueOf(&r), rng)
		r.Err = resultErrs[i%len(resultErrs)]
		res = append(res, r)
	}
	back, err := decodeResults(appendResults(nil, res))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, res) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, res)
	}
	if back, _ := decodeResults(appendResults(nil, []engine.Result{{Err: engine.ErrBadRecord}})); back[0].Err != errUnknownResult {
		t.Fatalf("unlisted error decoded as %v", back[0].Err)
	}
}
