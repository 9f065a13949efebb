package storage

var RestartableHealth = restartableHealth

// Restarts is how many times the guard has started JetStream again.
func (g *Guard) Restarts() int { return int(g.restarts.Load()) }
