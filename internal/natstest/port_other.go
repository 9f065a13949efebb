//go:build !unix

package natstest

import "os"

// Without flock, only the process's own callers are kept apart (portsMu).
func lockFile(*os.File) error { return nil }

func unlockFile(*os.File) {}
