//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package bus

import "os"

// lockStore does nothing where flock is not available (Windows, Solaris).
func lockStore(string) (*os.File, error) { return nil, nil }

func unlockStore(*os.File) {}
