package skill

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // a timezone: is valid or not the same on every machine, with or without /usr/share/zoneinfo

	"github.com/robfig/cron/v3"
)

// Schedule is when a skill runs without an event: its schedule, timezone and
// catch_up fields. The scheduler (package schedule) triggers the skill on each
// tick with {"scheduled_at": "<RFC3339>"} as the data.
type Schedule struct {
	// Cron is a standard 5-field cron expression (minute hour day-of-month month
	// day-of-week, where Sunday is 0 or 7), a descriptor (@yearly, @monthly, @weekly, @daily, @midnight,
	// @hourly) or @every <duration> (at least 1s, whole seconds).
	Cron string `json:"cron"`
	// Timezone is the IANA zone the cron expression is read in; "" is UTC. It has
	// no effect on @every.
	Timezone string `json:"timezone,omitempty"`
	// CatchUp is what happens to ticks missed while no scheduler ran:
	// CatchUpLatest (the default, "") runs the latest of them once, CatchUpAll runs
	// each, up to MaxCatchUp of the latest.
	CatchUp string `json:"catch_up,omitempty"`
}

// Brief is the schedule's cron expression, and its zone in parentheses when it
// has one: "0 9 * * mon-fri (Europe/Paris)", "@every 5s".
func (s *Schedule) Brief() string {
	if s == nil {
		return ""
	}
	if s.Timezone != "" {
		return s.Cron + " (" + s.Timezone + ")"
	}
	return s.Cron
}

// Catch-up policies of a Schedule.
const (
	CatchUpLatest = "latest"
	CatchUpAll    = "all"
)

// MaxCatchUp bounds how many missed ticks a schedule with catch_up: all runs
// after an outage: the latest MaxCatchUp; older ones are skipped.
const MaxCatchUp = 100

// Timetable gives a schedule's ticks.
type Timetable interface {
	// Next is the first tick strictly after t, or the zero time if there is none
	// within five years.
	Next(t time.Time) time.Time
}

// Compile parses the schedule. A schedule the parser accepted compiles; an error
// means it was built by hand or by another version.
func (s Schedule) Compile() (Timetable, error) {
	loc := time.UTC
	if s.Timezone != "" {
		l, err := loadZone(s.Timezone)
		if err != nil {
			return nil, err
		}
		loc = l
	}
	return parseCron(s.Cron, loc)
}

var errZone = errors.New("not an IANA time zone")

func loadZone(name string) (*time.Location, error) {
	// Local is whatever the machine is set to: the same skill would tick at
	// different times on different routers.
	if name == "" || name == "Local" || strings.ContainsAny(name, " \t") {
		return nil, fmt.Errorf("timezone %q: %w", name, errZone)
	}
	l, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("timezone %q: %w", name, errZone)
	}
	return l, nil
}

// parseCron parses a 5-field expression or a descriptor, read in loc.
func parseCron(spec string, loc *time.Location) (Timetable, error) {
	spec = strings.TrimSpace(spec)
	switch {
	case spec == "":
		return nil, errors.New("schedule is empty")
	case strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ="):
		return nil, errors.New("a time zone inside the expression is not supported; set timezone: instead")
	case strings.HasPrefix(spec, "@every"):
		d, err := time.ParseDuration(strings.TrimSpace(strings.TrimPrefix(spec, "@every")))
		if err != nil {
			return nil, fmt.Errorf("@every needs a duration such as 5m or 1h30m: %v", err)
		}
		if d < time.Second || d%time.Second != 0 {
			return nil, fmt.Errorf("@every %v: the interval must be whole seconds, at least 1s", d)
		}
		return cron.Every(d), nil
	}
	if f := strings.Fields(spec); len(f) == 5 {
		f[4] = sundayAsSeven(f[4])
		spec = strings.Join(f, " ")
	}
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		if strings.Contains(err.Error(), "above maximum (6)") { // only the day of week ends at 6
			return nil, fmt.Errorf("%v; the day of week is 0-6 from Sunday (0), or 7 for Sunday", err)
		}
		return nil, err
	}
	ss, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return nil, fmt.Errorf("%q is not a schedule", spec)
	}
	ss.Location = loc // the parser defaults to the machine's zone
	if ss.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, errors.New("it never fires (no such day)")
	}
	return ss, nil
}

// weekdays are the names the parser accepts in the day-of-week field.
var weekdays = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}

// sundayAsSeven rewrites a day-of-week field so that 7 is Sunday, as in Vixie
// cron and most others (the parser reads 0-6 only): 7 becomes 0, and a range
// ending at 7 or at Sunday's name (5-7, mon-7, 1-7/2, mon-sun) becomes the list
// of its days.
func sundayAsSeven(field string) string {
	items := strings.Split(field, ",")
	for i, it := range items {
		rng, step, hasStep := strings.Cut(it, "/")
		lo, hi, isRange := strings.Cut(rng, "-")
		sunday := hi == "7" || strings.EqualFold(hi, "sun") && lo != "0" && !strings.EqualFold(lo, "sun")
		switch {
		case rng == "7" && !hasStep:
			items[i] = "0"
		case isRange && sunday:
			a, err := strconv.Atoi(lo)
			if err != nil {
				a = slices.Index(weekdays, strings.ToLower(lo))
			}
			by := 1
			if hasStep {
				if by, err = strconv.Atoi(step); err != nil {
					continue
				}
			}
			if a < 0 || a > 7 || by < 1 {
				continue // the parser says what is wrong
			}
			var days []string
			for d := a; d <= 7; d += by {
				days = append(days, strconv.Itoa(d%7))
			}
			items[i] = strings.Join(days, ",")
		}
	}
	return strings.Join(items, ",")
}

// cronField is a field of a 5-field expression: its name and range.
type cronField struct {
	name   string
	lo, hi int
	names  []string // the names the parser accepts for lo, lo+1, ...
}

var cronFields = [5]cronField{
	{name: "minute", lo: 0, hi: 59},
	{name: "hour", lo: 0, hi: 23},
	{name: "day-of-month", lo: 1, hi: 31},
	{name: "month", lo: 1, hi: 12, names: []string{"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}},
	{name: "day-of-week", lo: 0, hi: 6, names: weekdays},
}

func (f cronField) value(s string) (int, bool) {
	if n, err := strconv.Atoi(s); err == nil {
		return n, true
	}
	if i := slices.Index(f.names, strings.ToLower(s)); i >= 0 {
		return f.lo + i, true
	}
	return 0, false
}

// lostStep is a step of a valid 5-field expression that selects a single value,
// because it is larger than the range it counts in: */90 in the minute field is
// minute 0 of every hour, not every 90 minutes. The message says what the
// schedule does; the hint, what to write instead. ok is false when no step is
// lost.
func lostStep(spec string) (msg, hint string, ok bool) {
	fields := strings.Fields(spec)
	if len(fields) != 5 {
		return "", "", false
	}
	for i, text := range fields {
		f := cronFields[i]
		for it := range strings.SplitSeq(text, ",") {
			rng, stepText, hasStep := strings.Cut(it, "/")
			step, err := strconv.Atoi(stepText)
			if !hasStep || err != nil || step < 2 {
				continue
			}
			lo, hi := f.lo, f.hi
			if rng != "*" && rng != "?" {
				a, b, isRange := strings.Cut(rng, "-")
				var okA, okB bool
				lo, okA = f.value(a)
				okB = true
				if isRange {
					hi, okB = f.value(b)
					if i == 4 && hi == 0 && lo > 0 { // mon-sun: Sunday as 7
						hi = 7
					}
				}
				if !okA || !okB {
					continue
				}
			}
			if lo+step <= hi {
				continue
			}
			var what, unit string
			switch i {
			case 0:
				what, unit = fmt.Sprintf("at minute %d of every hour", lo), "minutes"
			case 1:
				what, unit = fmt.Sprintf("in hour %d of every day", lo), "hours"
				if m, err := strconv.Atoi(fields[0]); err == nil {
					what = fmt.Sprintf("at %02d:%02d every day", lo, m)
				}
			case 2:
				what, unit = fmt.Sprintf("on day %d of every month", lo), "days"
			case 3:
				what, unit = fmt.Sprintf("in month %d of every year", lo), "months"
			default:
				what, unit = fmt.Sprintf("on day %d of every week (%s)", lo, weekdays[lo%7]), "days"
			}
			msg = fmt.Sprintf("%s in the %s field fires only %s: a step counts within its range, %d-%d", it, f.name, what, lo, hi)
			if rng == "*" || rng == "?" {
				msg = fmt.Sprintf("%s in the %s field fires only %s, not every %d %s: a step counts within the field's range, %d-%d",
					it, f.name, what, step, unit, lo, hi)
			}
			switch {
			case i == 0 && rng == "*":
				hint = fmt.Sprintf("every %d minutes cannot be written in cron; write @every %s (counted from the previous tick), or 0 * * * * for hourly",
					step, everyText(time.Duration(step)*time.Minute))
			case i == 1 && rng == "*":
				hint = fmt.Sprintf("every %d hours cannot be written in cron; write @every %s (counted from the previous tick), or %s 0 * * * for daily",
					step, everyText(time.Duration(step)*time.Hour), fields[0])
			default:
				hint = fmt.Sprintf("write %d in place of %s if that is meant", lo, it)
			}
			return msg, hint, true
		}
	}
	return "", "", false
}

// unevenStep is a step of */N in the minute or the hour field that does not
// divide the hour (60) or the day (24): the field starts again at 0 each hour or
// day, so */45 fires at minutes 0 and 45, 45 and then 15 minutes apart, not every
// 45 minutes. The message says what the schedule does; the hint, what to write
// instead. ok is false when every step divides its field's range.
func unevenStep(spec string) (msg, hint string, ok bool) {
	fields := strings.Fields(spec)
	if len(fields) != 5 {
		return "", "", false
	}
	for i, unit := range []string{"minutes", "hours"} {
		f := cronFields[i]
		n := f.hi - f.lo + 1
		for it := range strings.SplitSeq(fields[i], ",") {
			rng, stepText, hasStep := strings.Cut(it, "/")
			step, err := strconv.Atoi(stepText)
			if !hasStep || err != nil || (rng != "*" && rng != "?") || step < 2 || step >= n || n%step == 0 {
				continue
			}
			last := f.lo + (n-1)/step*step
			every := time.Duration(step) * time.Minute
			next := "hour's"
			if i == 1 {
				every, next = time.Duration(step)*time.Hour, "day's"
			}
			msg = fmt.Sprintf("%s in the %s field fires every %d %s from %d to %d, then %d %s later at the next %s %d: the field starts again at %d, so its runs are not all %d %s apart",
				it, f.name, step, unit, f.lo, last, n-last, unit, next, f.lo, f.lo, step, unit)
			hint = fmt.Sprintf("write @every %s for every %d %s (counted from the previous tick), or a step that divides %d", everyText(every), step, unit, n)
			return msg, hint, true
		}
	}
	return "", "", false
}

// everyText writes d as an @every duration: 1h30m, 36h, 45m.
func everyText(d time.Duration) string {
	h, m := int(d/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case h == 0:
		return fmt.Sprintf("%dm", m)
	case m == 0:
		return fmt.Sprintf("%dh", h)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}

// scheduleFields decode schedule, timezone and catch_up; checkSchedule checks them
// together once every field is read.
func scheduleFields() []*field {
	sched := func(b *builder) *Schedule {
		if b.s.Schedule == nil {
			b.s.Schedule = &Schedule{}
		}
		return b.s.Schedule
	}
	return []*field{
		{name: "schedule", decode: func(b *builder, d *decoder, p pair) {
			s, ok := d.str(p.v, "schedule")
			if !ok {
				return
			}
			if _, err := parseCron(s, time.UTC); err != nil {
				d.errAt(p.v, "schedule", `write 5 cron fields ("*/15 * * * *"), @hourly, @daily, or @every 5m`,
					"schedule %q is not valid: %v", s, err)
				return
			}
			if msg, hint, ok := lostStep(s); ok {
				d.warnAt(p.v, "schedule", hint, "schedule %q: %s", s, msg)
			} else if msg, hint, ok := unevenStep(s); ok {
				d.warnAt(p.v, "schedule", hint, "schedule %q: %s", s, msg)
			}
			sched(b).Cron = strings.TrimSpace(s)
		}},
		{name: "timezone", decode: func(b *builder, d *decoder, p pair) {
			s, ok := d.str(p.v, "timezone")
			if !ok {
				return
			}
			_, err := loadZone(s)
			if err == nil && !slices.Contains(zoneNames, s) && slices.ContainsFunc(zoneNames, func(z string) bool { return strings.EqualFold(z, s) }) {
				// A file system that ignores case (macOS) loads america/new_york
				// from /usr/share/zoneinfo; Linux and the embedded database do not.
				err = fmt.Errorf("timezone %q: %w (the names are case-sensitive)", s, errZone)
			}
			if err != nil {
				hint := "write an IANA name such as Europe/Berlin or America/New_York"
				if c := closestZone(s); c != "" {
					hint = "did you mean " + c + "?"
				}
				d.errAt(p.v, "timezone", hint, "%v", err)
				return
			}
			if f, ok := fixedZones[s]; ok {
				d.warnAt(p.v, "timezone", f.hint, "timezone %s is %s", s, f.what)
			} else if what, hint, ok := etcOffset(s); ok {
				d.warnAt(p.v, "timezone", hint, "timezone %s is %s", s, what)
			}
			sched(b).Timezone = s
		}},
		{name: "catch_up", decode: enumField("catch_up", []string{CatchUpLatest, CatchUpAll}, func(s *Skill) *string {
			if s.Schedule == nil {
				s.Schedule = &Schedule{}
			}
			return &s.Schedule.CatchUp
		})},
	}
}

// closestZone suggests a zone for a name Go does not know: one of zoneNames
// spelt in another case or with spaces (america/new_york, America/New York) or
// a letter off, a region's abbreviation (PST, est), or a city alone (berlin).
func closestZone(s string) string {
	t := strings.ReplaceAll(strings.TrimSpace(s), " ", "_")
	if z, ok := zoneAbbreviations[strings.ToUpper(t)]; ok {
		return z
	}
	if slices.Contains(zoneNames, t) {
		return t
	}
	if c := closest(t, zoneNames); c != "" {
		return c
	}
	found := ""
	for _, z := range zoneNames {
		if i := strings.LastIndexByte(z, '/'); i >= 0 && strings.EqualFold(z[i+1:], t) {
			if found != "" {
				return "" // two regions have a city of that name
			}
			found = z
		}
	}
	return found
}

// zoneAbbreviations are abbreviations people write for a zone, and the region
// meant. Of them Go knows EST, MST and HST, as fixed offsets (fixedZones).
var zoneAbbreviations = map[string]string{
	"EST": "America/New_York", "EDT": "America/New_York", "ET": "America/New_York",
	"CST": "America/Chicago", "CDT": "America/Chicago", "CT": "America/Chicago",
	"MST": "America/Denver", "MDT": "America/Denver", "MT": "America/Denver",
	"PST": "America/Los_Angeles", "PDT": "America/Los_Angeles", "PT": "America/Los_Angeles",
	"AKST": "America/Anchorage", "AKDT": "America/Anchorage", "HST": "Pacific/Honolulu",
	"BST": "Europe/London", "CEST": "Europe/Berlin", "JST": "Asia/Tokyo", "AEST": "Australia/Sydney", "AEDT": "Australia/Sydney",
}

// fixedZones are the legacy abbreviations Go loads as a fixed offset, with no
// daylight saving, that are easily taken for a region's time.
var fixedZones = map[string]struct{ what, hint string }{
	"EST": {"UTC-5 all year, without daylight saving: from March to November its ticks come an hour late by New York's clocks",
		"write America/New_York for US Eastern time, or America/Panama for UTC-5 all year"},
	"MST": {"UTC-7 all year, without daylight saving: from March to November its ticks come an hour late by Denver's clocks",
		"write America/Denver for US Mountain time, or America/Phoenix for UTC-7 all year"},
	"HST": {"a legacy abbreviation, UTC-10 all year",
		"write Pacific/Honolulu, Hawaii's time, which is the same and says where"},
}

// etcOffset says what an Etc/GMT±N zone is, whose sign is POSIX's, the opposite
// of what it reads as: Etc/GMT+5 is five hours behind UTC, UTC-5. ok is false for
// other zones, and for Etc/GMT itself.
func etcOffset(zone string) (what, hint string, ok bool) {
	rest, found := strings.CutPrefix(zone, "Etc/GMT")
	if !found || len(rest) < 2 || (rest[0] != '+' && rest[0] != '-') {
		return "", "", false
	}
	n, err := strconv.Atoi(rest[1:])
	if err != nil || n == 0 {
		return "", "", false
	}
	sign := "-"
	if rest[0] == '-' {
		sign = "+"
	}
	return fmt.Sprintf("UTC%s%d all year: the Etc zones' signs are POSIX's, the opposite of ISO 8601's", sign, n),
		"if UTC" + rest + " is meant, write Etc/GMT" + sign + rest[1:] + ", or better a region's name (America/New_York)", true
}

// checkSchedule reports timezone or catch_up without a schedule, and a timezone
// that has no effect.
func (b *builder) checkSchedule() {
	s := b.s.Schedule
	if s == nil {
		return
	}
	if s.Cron == "" {
		if !b.reported("schedule") {
			for _, k := range []string{"timezone", "catch_up"} {
				if set, ok := b.set[k]; ok {
					set.d.errAt(set.key, k, "add schedule:, or remove "+k, "%s needs a schedule", k)
				}
			}
		}
		b.s.Schedule = nil
		return
	}
	if s.Timezone != "" && strings.HasPrefix(s.Cron, "@every") {
		set := b.set["timezone"]
		set.d.warnAt(set.key, "timezone", "remove it", "timezone has no effect on @every, which counts from the last tick")
	}
	if s.CatchUp == "" {
		s.CatchUp = CatchUpLatest
	}
	b.checkTickInputs()
}

// TickInput is the field of a tick's data, and so the input a scheduled workflow
// gets: the tick's time, RFC 3339 in UTC.
const TickInput = "scheduled_at"

// checkTickInputs reports a scheduled workflow whose declared inputs would refuse
// every tick: one that declares inputs but not scheduled_at (or "*"), or requires
// another input without a default.
func (b *builder) checkTickInputs() {
	wf := b.s.Workflow
	set, ok := b.set["schedule"]
	if wf == nil || !ok {
		return
	}
	checkOnlyInput(wf, TickInput, func(in Input) {
		if in.Type != "" && in.Type != "string" {
			set.d.errAt(set.val, "schedule", "declare scheduled_at with type: string",
				"each tick gives input %s as an RFC 3339 string, but it is declared as %s", TickInput, in.Type)
		}
	}, func(in Input) {
		set.d.errAt(set.val, "schedule", "give input "+in.Name+" a default, or make it optional",
			"input %s is required, but a tick gives only %s", in.Name, TickInput)
	}, func() {
		set.d.errAt(set.val, "schedule", "add an input scheduled_at (type: string), or one named \"*\"",
			"each tick's data is {%q: <time>}, an input the workflow does not declare; every tick would fail", TickInput)
	})
}

// checkOnlyInput checks the inputs of a workflow whose every run gets data with
// the one field field (a tick's, a batch's): declared calls the field's own
// declaration, to check its type; required each other input required without a
// default; missing when neither field nor "*" is declared. A workflow that
// declares no inputs takes any data.
func checkOnlyInput(wf *Workflow, field string, declared, required func(Input), missing func()) {
	if len(wf.Inputs) == 0 {
		return
	}
	found := false
	for _, in := range wf.Inputs {
		switch {
		case in.Name == AnyInput:
			found = true
		case in.Name == field:
			found = true
			declared(in)
		case in.Required && in.Default == nil:
			required(in)
		}
	}
	if !found {
		missing()
	}
}
