// Package layout holds the tests that keep the repository's layout: the
// import rules of the code map in README.md (which rlserver packages each
// package may import), and no build output in git (no tracked executable
// or file over 1 MB, every program's go build output ignored).
package layout
