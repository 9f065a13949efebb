package stats

// Ready is closed once the counts written before Watch are summed.
func (s *Window) Ready() <-chan struct{} { return s.ready }
