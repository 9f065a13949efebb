package skill

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Severity says whether a diagnostic rejects the skill.
type Severity string

const (
	// SeverityError diagnostics reject the skill: it is absent from the catalog.
	SeverityError Severity = "error"
	// SeverityWarning diagnostics are reported; the skill still loads.
	SeverityWarning Severity = "warning"
)

// Diagnostic is one problem found in a skill file, positioned like a compiler message.
type Diagnostic struct {
	File     string   `json:"file"`
	Line     int      `json:"line,omitempty"` // 1-based; 0 when unknown
	Col      int      `json:"col,omitempty"`  // 1-based; 0 when unknown
	Severity Severity `json:"severity"`
	Field    string   `json:"field,omitempty"` // e.g. "name", "steps[2].args.branch"
	Message  string   `json:"message"`
	Hint     string   `json:"hint,omitempty"` // how to fix it, when there is one
}

// String formats the diagnostic like a compiler:
//
//	skills/a/SKILL.md:3:7: error: name must be ... (hint: ...)
func (d Diagnostic) String() string {
	var b strings.Builder
	b.WriteString(d.File)
	if d.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(d.Line))
		if d.Col > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(d.Col))
		}
	}
	b.WriteString(": ")
	b.WriteString(string(d.Severity))
	b.WriteString(": ")
	b.WriteString(d.Message)
	if d.Hint != "" {
		b.WriteString(" (hint: ")
		b.WriteString(d.Hint)
		b.WriteByte(')')
	}
	return b.String()
}

// Diagnostics is a list of diagnostics, errors and warnings mixed.
type Diagnostics []Diagnostic

// HasErrors reports whether any diagnostic is an error.
func (ds Diagnostics) HasErrors() bool {
	return slices.ContainsFunc(ds, func(d Diagnostic) bool { return d.Severity == SeverityError })
}

// Errors returns the diagnostics that are errors.
func (ds Diagnostics) Errors() Diagnostics {
	return ds.filter(SeverityError)
}

// Warnings returns the diagnostics that are warnings.
func (ds Diagnostics) Warnings() Diagnostics {
	return ds.filter(SeverityWarning)
}

func (ds Diagnostics) filter(s Severity) Diagnostics {
	var out Diagnostics
	for _, d := range ds {
		if d.Severity == s {
			out = append(out, d)
		}
	}
	return out
}

// Err returns nil when there are no errors, else an *InvalidError listing them
// (warnings left out), which matches ErrInvalid.
func (ds Diagnostics) Err() error {
	errs := ds.Errors()
	if len(errs) == 0 {
		return nil
	}
	return &InvalidError{Diagnostics: errs}
}

// String formats one diagnostic per line.
func (ds Diagnostics) String() string {
	var b strings.Builder
	for i, d := range ds {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(d.String())
	}
	return b.String()
}

// Sort orders diagnostics by file, line and column, keeping the order of diagnostics
// at the same position. Parsing in parallel then still reports deterministically.
func (ds Diagnostics) Sort() {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(
			strings.Compare(a.File, b.File),
			cmp.Compare(a.Line, b.Line),
			cmp.Compare(a.Col, b.Col),
		)
	})
}

// ErrInvalid is matched (errors.Is) by the error Diagnostics.Err returns.
var ErrInvalid = errors.New("invalid skill")

// InvalidError carries the error diagnostics that made a skill invalid.
type InvalidError struct {
	Diagnostics Diagnostics
}

func (e *InvalidError) Error() string {
	n := len(e.Diagnostics)
	if n == 1 {
		return e.Diagnostics[0].String()
	}
	return fmt.Sprintf("%d errors:\n%s", n, e.Diagnostics.String())
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }

// report collects diagnostics for one file.
type report struct {
	file string
	ds   *Diagnostics
}

func (r report) add(sev Severity, line, col int, field, hint, format string, args ...any) {
	*r.ds = append(*r.ds, Diagnostic{
		File:     r.file,
		Line:     line,
		Col:      col,
		Severity: sev,
		Field:    field,
		Message:  fmt.Sprintf(format, args...),
		Hint:     hint,
	})
}

// at is a position in a file.
type at struct {
	file      string
	line, col int
}

func (p at) diag(sev Severity, field, hint, format string, args ...any) Diagnostic {
	return Diagnostic{File: p.file, Line: p.line, Col: p.col, Severity: sev, Field: field,
		Message: fmt.Sprintf(format, args...), Hint: hint}
}

func (p at) String() string {
	switch {
	case p.line == 0:
		return p.file
	case p.col == 0:
		return fmt.Sprintf("%s:%d", p.file, p.line)
	}
	return fmt.Sprintf("%s:%d:%d", p.file, p.line, p.col)
}
