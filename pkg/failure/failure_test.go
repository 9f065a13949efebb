package failure_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/skillbus/skillbus/pkg/failure"
)

func TestClassOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		err  error
		want failure.Class
	}{
		{nil, ""},
		{failure.Retry("x"), failure.Retryable},
		{failure.Fatalf("x"), failure.Fatal},
		{failure.Repair("x"), failure.Repairable},
		{fmt.Errorf("step a: %w", failure.Fatalf("timeout")), failure.Fatal}, // an explicit class beats the patterns
		{fmt.Errorf("call: %w", context.DeadlineExceeded), failure.Retryable},
		{errors.New("open /x: permission denied"), failure.Fatal},
		{errors.New("issue AAP-1 not found"), failure.Fatal},
		{errors.New("invalid date format"), failure.Fatal},
		{errors.New("capability gpu is not available"), failure.Fatal},
		{errors.New("missing parameter issue_key"), failure.Repairable},
		{errors.New("missing required field branch"), failure.Repairable},
		{errors.New("template error at 1:4"), failure.Repairable},
		{errors.New("bad path: error resolving x"), failure.Repairable},
		{errors.New("connection reset by peer"), failure.Retryable},
	}
	for _, tt := range tests {
		if got := failure.ClassOf(tt.err); got != tt.want {
			t.Errorf("ClassOf(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
	if failure.Wrap(failure.Fatal, nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
	base := errors.New("base")
	if !errors.Is(failure.Wrap(failure.Fatal, base), base) {
		t.Error("Wrap hides the wrapped error")
	}
}

func TestFaultInChain(t *testing.T) {
	inner := errors.New(`steps.fetch.result has no key "titel"`)
	err := fmt.Errorf("step fetch: %w", (&failure.Fault{Kind: failure.FaultReference, Name: "titel", Have: []string{"body", "title"}, Err: inner}).Repairable())
	if failure.ClassOf(err) != failure.Repairable {
		t.Fatalf("class %q, want repairable", failure.ClassOf(err))
	}
	f := failure.FaultOf(err)
	if f == nil || f.Name != "titel" || f.Kind != failure.FaultReference {
		t.Fatalf("FaultOf = %+v", f)
	}
	if !errors.Is(err, inner) || err.Error() != "step fetch: "+inner.Error() {
		t.Fatalf("chain lost the cause: %v", err)
	}
	if failure.FaultOf(failure.Repair("parameter x is bad")) != nil {
		t.Fatal("an error without a fault has none")
	}
}
