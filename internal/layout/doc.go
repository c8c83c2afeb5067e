// Package layout holds the test that keeps the import rules of the code
// map in README.md: which rlserver packages each package may import.
package layout
