package registry

// WatchList is the directories a started registry watches.
func WatchList(r *Registry) []string { return r.fw.WatchList() }
