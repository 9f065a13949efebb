//go:build !unix

package bus

import "os"

// lockStore does nothing where flock is not available.
func lockStore(string) (*os.File, error) { return nil, nil }

func unlockStore(*os.File) {}
