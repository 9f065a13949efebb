package expr

import (
	"testing"

	"go.uber.org/goleak"
)

// Evaluations with a cancellable context start a context.AfterFunc goroutine;
// none may outlive its evaluation.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
