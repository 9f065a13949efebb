package failure

import (
	"errors"
	"fmt"
)

// FaultKind is what kind of mistake a repairable failure is, precisely enough for a
// repairer to look for the fix.
type FaultKind string

const (
	// FaultParameter: a tool refused a call's arguments (HTTP 400 or 422), or an
	// argument or input is missing or invalid.
	FaultParameter FaultKind = "parameter"
	// FaultPath: a path the skill names does not exist among its files.
	FaultPath FaultKind = "path"
	// FaultReference: a template or expression read a key or attribute that the
	// value it read from does not have.
	FaultReference FaultKind = "reference"
	// FaultUnknownFilter: a template names a filter that does not exist.
	FaultUnknownFilter FaultKind = "unknown_filter"
)

// Fault describes a repairable failure: what was missing or misspelt, what was
// there instead, and where in the skill. It sits in an error chain under a
// Repairable *Error; FaultOf finds it.
type Fault struct {
	Kind FaultKind `json:"kind"`
	// Name is the missing or misspelt name: a key, an attribute, a filter, a path,
	// a parameter.
	Name string `json:"name,omitempty"`
	// Have are the names the run-time value actually has (its keys, the filters
	// there are, the skill's files, the parameters the tool named), sorted.
	Have []string `json:"have,omitempty"`
	// Value names the value that was read ("steps.fetch.result"), when known.
	Value string `json:"value,omitempty"`
	// Field is where in the step the failing text is ("args.title", "condition").
	Field string `json:"field,omitempty"`
	// Step is the failing step's id; empty outside steps.
	Step string `json:"step,omitempty"`
	// File and Line locate the mistake in the skill's files when known; Line is
	// 1-based, 0 if unknown.
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
	// Err is the error as it was reported.
	Err error `json:"-"`
}

func (f *Fault) Error() string {
	if f.Err != nil {
		return f.Err.Error()
	}
	return fmt.Sprintf("%s fault: %q", f.Kind, f.Name)
}

func (f *Fault) Unwrap() error { return f.Err }

// Repairable wraps the fault as a Repairable *Error.
func (f *Fault) Repairable() error { return &Error{Class: Repairable, Err: f} }

// FaultOf returns the Fault in err's chain, or nil: a repairable failure without
// one (classified from its message only) cannot be repaired automatically.
func FaultOf(err error) *Fault {
	var f *Fault
	if errors.As(err, &f) {
		return f
	}
	return nil
}
