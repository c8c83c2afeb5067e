// Package layout holds the tests that keep the repository's layout: the
// import rules of the code map in README.md (which rlserver packages each
// package may import), no build output in git (no tracked executable
// or file over 1 MB, every program's go build output ignored), and an edge
// that never discovers its backend's capabilities by type assertion.
package layout
