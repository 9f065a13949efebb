package workflow_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Steps run in goroutines of their own; none may outlive Execute.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
