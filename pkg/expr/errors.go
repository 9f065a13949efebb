package expr

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/skillbus/skillbus/pkg/failure"
)

// Error is a problem in a template, condition or compute block: a syntax error, an
// unknown key, a type error, a limit exceeded. It says where, in the text the user
// wrote. Errors returned by this package carry a failure class: Repairable for
// mistakes in the skill (syntax, references, types), Fatal for exceeded limits;
// errors.As finds the *Error inside.
type Error struct {
	// File and FileLine, when set, place the source in a file: its line Line is
	// the file's line FileLine+Line-1 (the message then begins with it, so that an
	// editor can jump there).
	File     string
	FileLine int
	Name     string // the subject, as given by WithName (may be empty)
	Line     int    // 1-based line in the source; 0 if unknown
	Col      int    // 1-based column, in characters
	Msg      string
	Text     string // the source line at Line
}

func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" && e.FileLine > 0 && e.Line > 0 {
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.FileLine+e.Line-1)
	}
	b.WriteString(e.Name)
	if e.Line > 0 {
		if e.Name != "" {
			b.WriteByte(':')
		}
		fmt.Fprintf(&b, "%d:%d", e.Line, e.Col)
	}
	if b.Len() > 0 {
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	if e.Line > 0 && strings.TrimSpace(e.Text) != "" {
		text, col := clip(e.Text, e.Col)
		b.WriteString("\n\t")
		b.WriteString(text)
		b.WriteString("\n\t")
		for i, r := range text {
			if utf8.RuneCountInString(text[:i]) >= col-1 {
				break
			}
			if r == '\t' {
				b.WriteByte('\t')
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteByte('^')
	}
	return b.String()
}

// clip shortens a long line to a window around column col, returning the new
// column.
func clip(text string, col int) (string, int) {
	const half = 60
	runes := []rune(text)
	if len(runes) <= 2*half {
		return text, col
	}
	from := max(0, col-1-half)
	to := min(len(runes), col-1+half)
	s := string(runes[from:to])
	if from > 0 {
		s = "…" + s
		col = col - from + 1
	}
	if to < len(runes) {
		s += "…"
	}
	return s, col
}

func repairable(e *Error) error { return failure.Wrap(failure.Repairable, e) }
func fatal(e *Error) error      { return failure.Wrap(failure.Fatal, e) }

// A limitError reports an exceeded limit from inside an evaluation. Evaluation
// returns it as a Fatal *Error.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }
