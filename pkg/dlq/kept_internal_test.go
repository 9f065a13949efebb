package dlq

import (
	"testing"
	"time"
)

func TestKeptFor(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * 24 * time.Hour: "30 days",
		24 * time.Hour:      "1 day",
		36 * time.Hour:      "36h0m0s",
		0:                   "until the stream's limits remove them",
	} {
		if got := keptFor(d); got != want {
			t.Errorf("keptFor(%v) = %q, want %q", d, got, want)
		}
	}
}
