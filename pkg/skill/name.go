package skill

import (
	"fmt"
	"strings"
)

// MaxNameLen is the longest skill name (Agent Skills).
const MaxNameLen = 64

// NormalizeName is the key under which a skill is looked up: lowercase, with '_'
// written as '-'. Two valid names with the same normal form conflict, so the key is
// unambiguous across a catalog; routers index skills by it so that "$start_work" and
// "start-work" find the same skill.
func NormalizeName(name string) string {
	return strings.ReplaceAll(strings.ToLower(name), "_", "-")
}

// ValidName reports whether name is a valid skill name: 1–64 characters of lowercase
// letters, digits, '-' and '_', starting with a letter or digit, not ending with a
// separator and without two separators in a row.
func ValidName(name string) bool {
	return nameProblem(name) == ""
}

func isSep(c byte) bool { return c == '-' || c == '_' }

func isLowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// nameProblem says what is wrong with a skill name, or "" when it is valid.
func nameProblem(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > MaxNameLen:
		return fmt.Sprintf("is %d characters long; the limit is %d", len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case isLowerAlnum(c):
		case isSep(c):
			if i == 0 {
				return fmt.Sprintf("starts with %q; it must start with a letter or digit", c)
			}
			if i == len(name)-1 {
				return fmt.Sprintf("ends with %q", c)
			}
			if isSep(name[i-1]) {
				return fmt.Sprintf("has two separators in a row (%q)", name[i-1:i+1])
			}
		case 'A' <= c && c <= 'Z':
			return "has uppercase letters"
		default:
			r := []rune(name[i:])[0]
			return fmt.Sprintf("contains %q; only lowercase letters, digits, '-' and '_' are allowed", r)
		}
	}
	return ""
}

// suggestName is the valid name closest to name: lowercase, each run of other
// characters written as '-', separators not doubled nor at either end. It returns ""
// when nothing of name survives.
func suggestName(name string) string {
	var b strings.Builder
	pendingSep := byte(0)
	for _, r := range strings.ToLower(name) {
		var c byte
		switch {
		case r < 0x80 && isLowerAlnum(byte(r)):
			c = byte(r)
		case r == '-' || r == '_':
			if pendingSep == 0 {
				pendingSep = byte(r)
			}
			continue
		default:
			if pendingSep == 0 {
				pendingSep = '-'
			}
			continue
		}
		if pendingSep != 0 && b.Len() > 0 {
			if b.Len()+2 > MaxNameLen {
				break
			}
			b.WriteByte(pendingSep)
		}
		pendingSep = 0
		if b.Len()+1 > MaxNameLen {
			break
		}
		b.WriteByte(c)
	}
	return b.String()
}

// isIdent reports whether s is an identifier usable as a template name: step ids,
// input names, outputs and loop variables.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9' {
			continue
		}
		return false
	}
	return true
}

// suggestIdent turns s into an identifier: each run of other characters becomes '_'.
func suggestIdent(s string) string {
	var b strings.Builder
	sep := false
	for _, r := range s {
		if r < 0x80 && (r == '_' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			if sep && b.Len() > 0 {
				b.WriteByte('_')
			}
			sep = false
			b.WriteRune(r)
			continue
		}
		sep = true
	}
	out := b.String()
	if out != "" && '0' <= out[0] && out[0] <= '9' {
		out = "_" + out
	}
	return out
}

// subjectTokenProblem says why s cannot be used as dot-separated NATS subject tokens
// (a CloudEvent type's dots become the tokens of its trigger subject), or "" when it
// can.
func subjectTokenProblem(s string) string {
	if s == "" {
		return "is empty"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '.':
			if i == 0 || i == len(s)-1 || s[i-1] == '.' {
				return "has an empty token (a leading, trailing or doubled '.')"
			}
		case c == '_' || c == '-' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9':
		default:
			r := []rune(s[i:])[0]
			return fmt.Sprintf("contains %q; only letters, digits, '_', '-' and '.' are allowed", r)
		}
	}
	return ""
}
