// Package failure classifies what went wrong in a skill execution, because the class
// decides what happens next: a retryable failure is redelivered by the
// broker with backoff, a fatal one falls back along the plan's chain, a repairable one
// goes to the repair stream.
//
// Tools and the engine return *Error values with an explicit class. Errors that carry no
// class are classified by patterns in their message ("permission denied", "not found",
// "parameter", "template", ...), so a tool written without
// this package still behaves sensibly.
package failure

import (
	"context"
	"errors"
	"fmt"
	"regexp"
)

// Class is the failure class of an error.
type Class string

const (
	// Retryable failures may succeed if tried again: timeouts, connection errors, 429, 5xx.
	Retryable Class = "retryable"
	// Fatal failures will fail again: validation, permission, not found, invalid
	// format, capability unavailable.
	Fatal Class = "fatal"
	// Repairable failures come from the skill or its inputs and may be fixed by a
	// repair strategy: a bad or missing parameter, a template or reference error, a
	// path error.
	Repairable Class = "repairable"
)

// Error is an error with a failure class.
type Error struct {
	Class Class
	Err   error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// New returns an error of class c with a formatted message.
func New(c Class, format string, args ...any) error {
	return &Error{Class: c, Err: fmt.Errorf(format, args...)}
}

// Wrap gives err the class c; a nil err stays nil.
func Wrap(c Class, err error) error {
	if err == nil {
		return nil
	}
	return &Error{Class: c, Err: err}
}

// Retry, Fatalf and Repair are shorthands for New with each class.
func Retry(format string, args ...any) error  { return New(Retryable, format, args...) }
func Fatalf(format string, args ...any) error { return New(Fatal, format, args...) }
func Repair(format string, args ...any) error { return New(Repairable, format, args...) }

// The patterns, used only for errors that carry no class. Order matters: the
// first match wins, and "not found" is fatal for the fallback state machine even though
// the repair loop also lists it.
var (
	fatalPatterns = []*regexp.Regexp{
		regexp.MustCompile(`(?i)permission denied`),
		regexp.MustCompile(`(?i)not found`),
		regexp.MustCompile(`(?i)invalid.*format`),
		regexp.MustCompile(`(?i)capability.*not.*available`),
	}
	repairablePatterns = []*regexp.Regexp{
		regexp.MustCompile(`(?i)parameter`),
		regexp.MustCompile(`(?i)missing.*field`),
		regexp.MustCompile(`(?i)path.*error`),
		regexp.MustCompile(`(?i)template`),
		regexp.MustCompile(`(?i)reference`),
	}
)

// ClassOf returns the class of err: the class of the first *Error in its chain, or
// for a cancelled or timed-out context Retryable, or else the class the patterns below
// give its message (default Retryable: an unknown error may well pass).
func ClassOf(err error) Class {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Class
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Retryable
	}
	msg := err.Error()
	for _, p := range fatalPatterns {
		if p.MatchString(msg) {
			return Fatal
		}
	}
	for _, p := range repairablePatterns {
		if p.MatchString(msg) {
			return Repairable
		}
	}
	return Retryable
}
