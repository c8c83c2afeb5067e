package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// One data folder, one process: two servers on the same --dir would
// overwrite each other's snapshots or Raft logs. The first takes an
// exclusive flock on rlserver.lock in the folder and writes its pid there;
// the kernel releases the lock when the process ends, however it ends
// (kill -9 included), so a stale file never blocks a start.

// lockFileName is the lock file's name inside the data folder.
const lockFileName = "rlserver.lock"

// lockDir takes the data folder's lock for the life of the process and
// returns the open lock file (closing it releases the lock).
func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFileName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data folder %s: lock file: %v", dir, errors.Unwrap(err))
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			b := make([]byte, 32)
			n, _ := f.ReadAt(b, 0)
			if pid, perr := strconv.Atoi(string(bytes.TrimSpace(b[:n]))); perr == nil {
				return nil, fmt.Errorf("data folder %s is in use by another rlserver (pid %d, holding %s); give each server its own --dir", dir, pid, path)
			}
			return nil, fmt.Errorf("data folder %s is in use by another rlserver (holding %s); give each server its own --dir", dir, path)
		}
		return nil, fmt.Errorf("data folder %s: locking %s: %v", dir, path, err)
	}
	// The pid is for the message above; failing to write it is harmless.
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	return f, nil
}

// writePidFile writes the process's pid to path (Redis's pidfile) and returns
// a function that removes it, for a clean exit. "" writes nothing.
func writePidFile(path string) (remove func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	if err := os.WriteFile(path, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("pidfile %s: %v", path, err)
	}
	return func() { os.Remove(path) }, nil
}
