package bus

// Infos is how many consumer infos the loop's monitor has looked at.
func (l *Loop) Infos() int64 { return l.infos.Load() }
