package storage

var RestartableHealth = restartableHealth

// Restarts is how many times the guard has started JetStream again.
func (g *Guard) Restarts() int { return int(g.restarts.Load()) }

// Watch is what a guard's looks carry from one to the next.
type Watch = watch

// Look looks once, as a started guard does every GuardConfig.Every.
func (g *Guard) Look(w *Watch) { g.look(w, g.cfg.Every) }
