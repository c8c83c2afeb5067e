//go:build race

package clienttest

func init() { raceEnabled = true }
