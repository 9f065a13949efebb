package skill

import (
	"fmt"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/skillbus/skillbus/pkg/flow"
)

// CancelOn is a rule that cancels a run of the skill when another event comes:
// an event of Type, within Timeout of the run's start, for which Match — a CEL
// expression over the event (event) and the trigger that started the run
// (trigger) — is true. Routers index the runs of skills with such rules when
// they start them, and look them up when they route an event of Type (package
// router).
type CancelOn struct {
	// Type is the CloudEvent type of the event that cancels.
	Type string `json:"type"`
	// Match compares the two events; "" cancels every run of the skill that an
	// event of Type finds.
	Match string `json:"match,omitempty"`
	// Timeout is how long after the run started an event may still cancel it:
	// whole seconds from MinCancelTimeout to MaxCancelTimeout; default
	// DefaultCancelTimeout.
	Timeout Duration `json:"timeout"`
}

// Bounds of a cancel_on rule's timeout.
const (
	MinCancelTimeout     = time.Second
	MaxCancelTimeout     = 7 * 24 * time.Hour
	DefaultCancelTimeout = time.Hour
	// MaxCancelOn bounds a skill's rules.
	MaxCancelOn = 8
)

var cancelOnKeys = []string{"type", "match", "timeout"}

func decodeCancelOn(b *builder, d *decoder, p pair) {
	const hint = "write cancel_on: [{type: com.example.order.paid, match: event.data.order_id == trigger.data.order_id, timeout: 1h}]"
	items, ok := d.seq(p.v, "cancel_on", hint)
	if !ok {
		return
	}
	if len(items) > MaxCancelOn {
		d.errAt(p.v, "cancel_on", "", "cancel_on has %d rules; at most %d", len(items), MaxCancelOn)
		return
	}
	var rules []CancelOn
	good := true
	for i, n := range items {
		f := fmt.Sprintf("cancel_on[%d]", i)
		ps, ok := d.pairs(n, f, hint)
		if !ok {
			good = false
			continue
		}
		c := CancelOn{Timeout: Duration(DefaultCancelTimeout)}
		seen := map[string]bool{}
		for _, e := range ps {
			ff := f + "." + e.key
			seen[e.key] = true
			switch e.key {
			case "type":
				s, ok := d.str(e.v, ff)
				switch {
				case !ok:
					good = false
				case subjectTokenProblem(s) != "" || strings.HasPrefix(s, "skill."):
					why := subjectTokenProblem(s)
					if why == "" {
						why = "starts with \"skill.\", which is reserved"
					}
					d.errAt(e.v, ff, "write a CloudEvent type such as com.example.order.paid", "%s %q is not a CloudEvent type: it %s", ff, s, why)
					good = false
				default:
					c.Type = s
				}
			case "match":
				s, ok := d.str(e.v, ff)
				if ok && d.matchAt(e.v, ff, s) {
					c.Match = strings.TrimSpace(s)
				} else {
					good = false
				}
			case "timeout":
				v, ok := d.duration(e.v, ff)
				switch {
				case !ok:
					good = false
				case time.Duration(v) < MinCancelTimeout || time.Duration(v) > MaxCancelTimeout || time.Duration(v)%time.Second != 0:
					d.errAt(e.v, ff, "write whole seconds from 1s to 168h, such as 1h", "%s %v is out of range", ff, time.Duration(v))
					good = false
				default:
					c.Timeout = v
				}
			default:
				d.errAt(e.k, ff, hintFor(e.key, cancelOnKeys), "unknown field %s", ff)
				good = false
			}
		}
		if !seen["type"] {
			d.errAt(n, f, hint, "%s needs type", f)
			good = false
		}
		rules = append(rules, c)
	}
	if good && len(rules) > 0 {
		b.s.CancelOn = rules
	}
}

// matchAt compiles a cancel_on match, reporting an error at its position in the
// file; false when it does not compile.
func (d *decoder) matchAt(n *yaml.Node, field, src string) bool {
	_, err := flow.CompileMatch(src)
	if err != nil {
		d.celError(n, field, src, err, "CEL over two events: event (the one that cancels) and trigger (the run's), each with id, type, source, subject, time, data; see docs/authoring.md, Flow control")
	}
	return err == nil
}

// String says what a rule is, as a person would.
func (c CancelOn) String() string {
	s := c.Type
	if c.Match != "" {
		s += " where " + c.Match
	}
	return s + fmt.Sprintf(" (within %v)", time.Duration(c.Timeout))
}
