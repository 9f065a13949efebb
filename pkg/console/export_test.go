package console

// Index is the console's index of runs.
func (c *Console) Index() *Index { return c.idx }

// Len is how many runs the index holds.
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.byID)
}
