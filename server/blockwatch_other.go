//go:build !linux

package server

// watchClosed does not watch off Linux: a parked client that leaves is
// noticed when a retry or its timeout ends the wait.
func watchClosed(*conn) (closed <-chan struct{}, stop func()) { return nil, func() {} }
