//go:build race

package envoy

func init() { raceEnabled = true }
