package skill

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/skillbus/skillbus/pkg/flow"
)

// Flow control: which triggers a skill takes (filter) and how often it runs
// (rate_limit), decided by the router before a run starts. The expressions are CEL
// over the trigger's CloudEvent (package flow); they are compiled here to report
// a bad one at its file:line, and compiled again, once per skill version, where
// they are evaluated.

// RateLimit bounds how often a skill runs across the whole fleet: at most Limit
// triggers per Period for each value of Key, triggers beyond it skipped and
// recorded (route.unmatched with code rate_limited), not queued. Routers count
// the triggers that start the skill (as the primary, beside it, or as an
// always-skill) in fixed windows of Period, in KV ratelimits (package router).
type RateLimit struct {
	// Key is a CEL expression over the trigger whose value names the counter a
	// trigger counts against (a customer, a tenant); "" is one counter for all.
	Key string `json:"key,omitempty"`
	// Limit is how many triggers pass per Period, at least 1.
	Limit int `json:"limit"`
	// Period is the length of a counting window: from MinRatePeriod to MaxRatePeriod.
	Period Duration `json:"period"`
}

// Bounds of a rate limit's period.
const (
	MinRatePeriod = time.Second
	MaxRatePeriod = 24 * time.Hour
)

// flowFields decode filter and rate_limit.
func flowFields() []*field {
	return []*field{
		{name: "filter", decode: func(b *builder, d *decoder, p pair) {
			s, ok := d.str(p.v, "filter")
			if !ok {
				return
			}
			if prg, ok := d.celProgram(p.v, "filter", s, flow.Filter, eventHint); ok {
				b.s.Filter = strings.TrimSpace(s)
				b.filter = &keyUse{d: d, n: p.v, field: "filter", reads: prg.Reads()}
			}
		}},
		{name: "rate_limit", container: true, decode: decodeRateLimit},
		{name: "debounce", container: true, decode: decodeDebounce},
		{name: "batch", container: true, decode: decodeBatch},
		{name: "cancel_on", container: true, decode: decodeCancelOn},
	}
}

// Debounce folds a burst of triggers into one run: triggers with the same Key
// within Period of each other start one run, with the last one's data, Period
// after the last of them — but no later than Timeout after the first, so a steady
// stream still runs. The run is held by the server (a scheduled message), not by
// a router (package router).
type Debounce struct {
	// Key is a CEL expression over the trigger whose value names the burst a
	// trigger joins; "" is one burst for all.
	Key string `json:"key,omitempty"`
	// Period is how long the skill waits after a trigger for the next one: from
	// MinDebounce to MaxDebounce, whole seconds.
	Period Duration `json:"period"`
	// Timeout bounds how long a burst may postpone its run, from its first
	// trigger: at least Period, at most MaxDebounce; default DebounceTimeout.
	Timeout Duration `json:"timeout"`
}

// Bounds of a debounce.
const (
	MinDebounce = time.Second
	MaxDebounce = 24 * time.Hour
)

// DebounceTimeout is the timeout of a debounce that gives none: ten periods, at
// most MaxDebounce.
func DebounceTimeout(period time.Duration) time.Duration { return min(10*period, MaxDebounce) }

func decodeDebounce(b *builder, d *decoder, p pair) {
	const hint = "write debounce: {period: 2s, timeout: 30s} and, to debounce per customer, key: data.customer"
	db := Debounce{}
	seen, good := d.members(p.k, p.v, "debounce", "debounce", hint,
		keyMember(nil, &db.Key),
		secondsMember("period", &db.Period, MinDebounce, MaxDebounce, "2s or 1m").must(),
		secondsMember("timeout", &db.Timeout, MinDebounce, MaxDebounce, "2s or 1m"),
	)
	if good && db.Timeout != 0 && db.Timeout < db.Period {
		d.errAt(seen["timeout"].v, "debounce.timeout", "the timeout bounds a burst of periods: make it at least the period", "debounce.timeout %v is shorter than debounce.period %v", time.Duration(db.Timeout), time.Duration(db.Period))
		good = false
	}
	if good && b.s.Batch != nil {
		d.errAt(p.k, "debounce", "a debounce runs a burst's last trigger, a batch all of them: keep one", "a skill has debounce or batch, not both")
		good = false
	}
	if good {
		if db.Timeout == 0 {
			db.Timeout = Duration(DebounceTimeout(time.Duration(db.Period)))
		}
		b.s.Debounce = &db
	}
}

// String says what a debounce is, as a person would: "2s (at most 30s) by data.customer".
func (db Debounce) String() string {
	s := fmt.Sprintf("%v (at most %v)", time.Duration(db.Period), time.Duration(db.Timeout))
	if db.Key != "" {
		s += " by " + db.Key
	}
	return s
}

func decodeRateLimit(b *builder, d *decoder, p pair) {
	const hint = "write rate_limit: {limit: 10, period: 1m} and, to count per customer, key: data.customer"
	rl := RateLimit{}
	if _, ok := d.members(p.k, p.v, "rate_limit", "rate_limit", hint,
		keyMember(b, &rl.Key),
		countMember("limit", &rl.Limit, 1, 0, "omit rate_limit for no limit").must(),
		secondsMember("period", &rl.Period, MinRatePeriod, MaxRatePeriod, "1m").must(),
	); ok {
		b.s.RateLimit = &rl
	}
}

// eventHint is what an expression over a trigger may read.
const eventHint = "CEL over the event: type, source, subject, id, time, data, extensions; see docs/authoring.md, Flow control"

// celAt compiles a CEL expression of field, reporting an error at its position in
// the file; false when it does not compile.
func (d *decoder) celAt(n *yaml.Node, field, src string, kind flow.Kind) bool {
	return d.celAtHint(n, field, src, kind, eventHint)
}

// celAtHint is celAt with the hint its error gives.
func (d *decoder) celAtHint(n *yaml.Node, field, src string, kind flow.Kind, hint string) bool {
	_, ok := d.celProgram(n, field, src, kind, hint)
	return ok
}

// celProgram is celAtHint returning the compiled expression.
func (d *decoder) celProgram(n *yaml.Node, field, src string, kind flow.Kind, hint string) (*flow.Program, bool) {
	prg, err := flow.Compile(src, kind)
	if err != nil {
		d.celError(n, field, src, err, hint)
		return nil, false
	}
	return prg, true
}

// celError reports an expression of field that does not compile, at its position
// in the file. A syntax error where the expression writes and, or or not as words
// says how CEL writes them instead of hint.
func (d *decoder) celError(n *yaml.Node, field, src string, err error, hint string) {
	var fe *flow.Error
	if !errors.As(err, &fe) {
		d.errAt(n, field, "", "%s: %v", field, err)
		return
	}
	line, col := d.exprPos(n, fe.Line, fe.Column)
	if strings.Contains(fe.Msg, "Syntax error") && pythonWords.MatchString(celStrings.ReplaceAllString(src, `""`)) {
		hint = "CEL writes and/or/not as &&, ||, !"
	}
	d.add(SeverityError, line, col, field, hint, "%s is not a valid expression: %s", field, fe.Msg)
}

// pythonWords finds and, or and not written as words, not as fields (data.not).
var pythonWords = regexp.MustCompile(`(^|[^.\w])(and|or|not)\b`)

// celStrings are CEL's one-line string literals, whose words are text.
var celStrings = regexp.MustCompile(`"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'`)

// exprPos maps a line and column of an expression to the file: for a block scalar,
// its lines are the file's lines below the indicator, less the block's indentation;
// for a one-line
// value, the column is offset by the value's column and its quote.
func (d *decoder) exprPos(n *yaml.Node, line, col int) (int, int) {
	r := d.resolve(n)
	switch {
	case r.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0:
		// The block's indentation is its first line's; the expression's columns
		// start after it.
		if text, ok := d.line(n.Line + 1); ok {
			return n.Line + line, utf8.RuneCountInString(text) - utf8.RuneCountInString(strings.TrimLeft(text, " ")) + col
		}
		return n.Line + line, 0
	case line == 1:
		c := n.Column + col - 1
		if r.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			c++
		}
		return n.Line, c
	}
	return n.Line + line - 1, 0
}

// String says what a rate limit is, as a person would: "10 per 1m0s by data.customer".
func (r RateLimit) String() string {
	s := fmt.Sprintf("%d per %v", r.Limit, time.Duration(r.Period))
	if r.Key != "" {
		s += " by " + r.Key
	}
	return s
}

// checkDebounceReads reports the expressions of a debounced skill that read the
// burst's run other than as its triggers: the run is the last trigger with id
// its activation id and source /skillbus/debounce/<skill>. A filter, checked on
// each trigger and again on the run, that reads source or id may refuse the run
// whose triggers it took: source == "/shop" folds the shop's triggers, then
// filters out their run (a warning: source != "/test" is harmless). A key of a
// limit on the run (rate_limit, concurrency, throttle) that reads source is one
// key for every run (an error).
func (b *builder) checkDebounceReads() {
	if b.s.Debounce == nil {
		return
	}
	src := "/skillbus/debounce/" + b.s.Name
	if f := b.filter; f != nil {
		for _, r := range f.reads {
			if r.Name != "source" && r.Name != "id" {
				continue
			}
			value := src
			if r.Name == "id" {
				value = "its activation id"
			}
			line, col := f.d.exprPos(f.n, r.Line, r.Column)
			f.d.add(SeverityWarning, line, col, "filter", "filter on the data, subject or extensions, which the run keeps; or drop debounce",
				"filter reads %s, which is %s on the debounced run: the filter is checked on each trigger and again on their run, and a trigger it took may end in a run it refuses", r.Name, value)
		}
	}
	for _, k := range b.runKeys {
		for _, r := range k.reads {
			if r.Name != "source" {
				continue
			}
			line, col := k.d.exprPos(k.n, r.Line, r.Column)
			k.d.add(SeverityError, line, col, k.field, "key on the data, which the run keeps from its last trigger",
				"%s reads source, which is %s on every debounced run: one key for all", k.field, src)
		}
	}
}
