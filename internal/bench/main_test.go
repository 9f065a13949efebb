package bench

import (
	"os"
	"testing"
)

// TestMain lets the test binary be the bench's nats-server process too.
func TestMain(m *testing.M) {
	ServeIfChild()
	os.Exit(m.Run())
}
