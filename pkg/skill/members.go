package skill

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skillbus/skillbus/pkg/flow"
)

// Members of a limit. rate_limit, throttle, debounce, batch and each entry of
// concurrency are mappings of the same few kinds of member: a key (a CEL
// expression naming whose limit a trigger counts against), counts within
// bounds, and periods of whole seconds. members decodes such a mapping from a
// list of its members' rules, so that every one of them is read, bounded and
// reported alike: each error names the member as field.member at its
// file:line:col.

// member is the rule of one member of a limit's mapping.
type member struct {
	name     string
	required bool
	// decode reads the member's value v into its destination; false when it
	// reported an error.
	decode func(d *decoder, v *yaml.Node, field string) bool
}

// keyMember is "key": a CEL key over the trigger (package flow), evaluated by a
// router as it routes the trigger (rate_limit, debounce, batch). The key of a
// limit evaluated on a burst's or a batch's run too (rate_limit) is noted in
// b.runKeys; b is nil for the others, which read the triggers only.
func keyMember(b *builder, dst *string) member {
	return member{name: "key", decode: func(d *decoder, v *yaml.Node, field string) bool {
		s, ok := d.str(v, field)
		if !ok {
			return false
		}
		prg, ok := d.celProgram(v, field, s, flow.Key, eventHint)
		if !ok {
			return false
		}
		if b != nil {
			b.runKeys = append(b.runKeys, keyUse{d: d, n: v, field: field, reads: prg.Reads()})
		}
		*dst = strings.TrimSpace(s)
		return true
	}}
}

// runKeyHint is what a key of a run may read.
const runKeyHint = "CEL over the run: id, type, source, and data (its inputs); see docs/authoring.md, concurrency"

// runKeyMember is "key": a CEL key evaluated by a worker as a run is about to
// start (concurrency, throttle). The run carries its trigger's id, type and
// source, and its inputs as data; the trigger's subject, time and extensions
// are not in it, and would read as "" on every run: one key for all, which is
// not what was written. A key reading them is refused where it reads them.
func runKeyMember(b *builder, dst *string) member {
	return member{name: "key", decode: func(d *decoder, v *yaml.Node, field string) bool {
		s, ok := d.str(v, field)
		if !ok {
			return false
		}
		prg, ok := d.celProgram(v, field, s, flow.Key, runKeyHint)
		if !ok {
			return false
		}
		good := true
		for _, r := range prg.Reads() {
			switch r.Name {
			case "subject", "time", "extensions":
			default:
				continue
			}
			hint := "key on a field of the run's data"
			if r.Field != "" {
				hint = fmt.Sprintf("put %s in the trigger's data and key on data.%s", r.Field, r.Field)
			}
			line, col := d.exprPos(v, r.Line, r.Column)
			d.add(SeverityError, line, col, field, hint+"; see docs/authoring.md, concurrency",
				"%s reads %s, which a run does not carry: it would be \"\" on every run, one key for all; a key of a run reads id, type, source, and data (its inputs)", field, r)
			good = false
		}
		if good {
			b.runKeys = append(b.runKeys, keyUse{d: d, n: v, field: field, reads: prg.Reads()})
			*dst = strings.TrimSpace(s)
		}
		return good
	}}
}

// countMember is an integer from lo to hi; hi 0 is no upper bound. hint says
// what to write instead of a value out of bounds.
func countMember(name string, dst *int, lo, hi int, hint string) member {
	return member{name: name, decode: func(d *decoder, v *yaml.Node, field string) bool {
		n, ok := d.integer(v, field)
		switch {
		case !ok:
			return false
		case hi == 0 && n < lo:
			d.errAt(v, field, hint, "%s must be at least %d, not %d", field, lo, n)
			return false
		case hi != 0 && (n < lo || n > hi):
			d.errAt(v, field, hint, "%s must be from %d to %d, not %d", field, lo, hi, n)
			return false
		}
		*dst = n
		return true
	}}
}

// secondsMember is a duration of whole seconds from lo to hi; example is what
// the hint suggests ("2s or 1m").
func secondsMember(name string, dst *Duration, lo, hi time.Duration, example string) member {
	return member{name: name, decode: func(d *decoder, v *yaml.Node, field string) bool {
		p, ok := d.duration(v, field)
		if !ok {
			return false
		}
		if t := time.Duration(p); t < lo || t > hi || t%time.Second != 0 {
			d.errAt(v, field, fmt.Sprintf("write whole seconds from %s to %s, such as %s", shortDuration(lo), shortDuration(hi), example),
				"%s %v is out of range", field, t)
			return false
		}
		*dst = p
		return true
	}}
}

// must makes a member required.
func (m member) must() member {
	m.required = true
	return m
}

// members decodes the mapping v, found at k, of a limit: field names it in
// errors (field.member), what in the error of a required member it lacks
// ("rate_limit needs period", "concurrency entry 2 needs limit"). It returns
// where each member present was, and false when anything was wrong.
func (d *decoder) members(k, v *yaml.Node, field, what, hint string, ms ...member) (map[string]pair, bool) {
	ps, ok := d.pairs(v, field, hint)
	if !ok {
		return nil, false
	}
	seen := make(map[string]pair, len(ps))
	good := true
	for _, e := range ps {
		f := field + "." + e.key
		m, known := memberNamed(ms, e.key)
		switch {
		case !known:
			d.errAt(e.k, f, hintFor(e.key, memberNames(ms)), "unknown field %s", f)
			good = false
		case !m.decode(d, e.v, f):
			good = false
		}
		seen[e.key] = e
	}
	for _, m := range ms {
		if _, ok := seen[m.name]; m.required && !ok {
			d.errAt(k, field, hint, "%s needs %s", what, m.name)
			good = false
		}
	}
	return seen, good
}

func memberNamed(ms []member, name string) (member, bool) {
	for _, m := range ms {
		if m.name == name {
			return m, true
		}
	}
	return member{}, false
}

func memberNames(ms []member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.name
	}
	return out
}

// shortDuration writes a bound as a person would: 1s, 24h, 168h.
func shortDuration(t time.Duration) string {
	switch {
	case t%time.Hour == 0:
		return fmt.Sprintf("%dh", t/time.Hour)
	case t%time.Minute == 0:
		return fmt.Sprintf("%dm", t/time.Minute)
	}
	return fmt.Sprintf("%ds", t/time.Second)
}
