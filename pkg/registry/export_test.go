package registry

// WatchList is the directories a started registry watches.
func WatchList(r *Registry) []string { return r.fw.WatchList() }

// SetGCHook has GC call f between its listing and its deletes.
func SetGCHook(r *Registry, f func()) { r.gcHook = f }

// SetGCPurgeHook has GC call f just before it purges a version's key.
func SetGCPurgeHook(r *Registry, f func(name, digest string)) { r.gcPurgeHook = f }
