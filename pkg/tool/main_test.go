package tool_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// roles are the other parts the test binary can play, chosen by TOOLTEST_ROLE:
// tests start it again (os.Args[0]) as a worker, or as a program that worker runs.
var roles = map[string]func(){}

func TestMain(m *testing.M) {
	if role, ok := roles[os.Getenv("TOOLTEST_ROLE")]; ok {
		role()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}
