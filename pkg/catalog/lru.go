package catalog

import (
	"container/list"
	"sync"
)

// lru is a least-recently-used cache bounded by the total cost of its values. It
// holds immutable things (old versions, files of a version), so it never needs to
// invalidate.
type lru[K comparable, V any] struct {
	mu    sync.Mutex
	max   int64
	used  int64
	cost  func(V) int64
	order *list.List // front: most recently used
	items map[K]*list.Element
}

type lruItem[K comparable, V any] struct {
	key  K
	val  V
	cost int64
}

func newLRU[K comparable, V any](max int64, cost func(V) int64) *lru[K, V] {
	return &lru[K, V]{max: max, cost: cost, order: list.New(), items: map[K]*list.Element{}}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*lruItem[K, V]).val, true
	}
	var zero V
	return zero, false
}

// put adds v unless it alone costs more than the cache holds.
func (c *lru[K, V]) put(k K, v V) {
	n := c.cost(v)
	if n > c.max {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[k]; ok {
		c.used -= e.Value.(*lruItem[K, V]).cost
		c.order.Remove(e)
	}
	c.items[k] = c.order.PushFront(&lruItem[K, V]{key: k, val: v, cost: n})
	c.used += n
	for c.used > c.max {
		e := c.order.Back()
		it := e.Value.(*lruItem[K, V])
		c.order.Remove(e)
		delete(c.items, it.key)
		c.used -= it.cost
	}
}

func (c *lru[K, V]) size() (n int, bytes int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.items), c.used
}
