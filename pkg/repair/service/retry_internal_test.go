package service

import (
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
)

// A repair job whose writes fail is never dropped after a number of deliveries (a
// full store used to drop one after 20 tries, about 20 seconds): the consumer has
// no delivery limit and the wait between tries grows to 30 seconds.
func TestRepairJobsAreRetriedWithoutALimit(t *testing.T) {
	t.Parallel()
	b := natstest.Start(t).Bus(t, bus.Config{})
	if got := (&Service{cfg: Config{Bus: b}}).ConsumerConfig().MaxDeliver; got != -1 {
		t.Fatalf("repair consumer MaxDeliver = %d, want -1 (no limit)", got)
	}
	for _, c := range []struct {
		n    uint64
		want time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {6, 30 * time.Second}, {20, 30 * time.Second}, {1 << 40, 30 * time.Second}} {
		if got := retryDelay(c.n); got != c.want {
			t.Errorf("retryDelay(%d) = %v, want %v", c.n, got, c.want)
		}
	}
}
