package schedule

// Leader reports whether this scheduler leads.
func (s *Scheduler) Leader() bool { return s.leader.Load() }
