package skill

import (
	"archive/zip"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestScheduleFields(t *testing.T) {
	t.Parallel()
	md := func(fields string) []byte {
		return []byte("---\nname: nightly\ndescription: d\n" + fields + "---\nCompact the nightly logs of every service and report how much space was freed.\n")
	}
	tests := []struct {
		name   string
		fields string
		want   *Schedule
		diags  []string // "line:col: severity: message" prefixes, in order
	}{
		{name: "cron", fields: "schedule: \"*/15 * * * *\"\n", want: &Schedule{Cron: "*/15 * * * *", CatchUp: CatchUpLatest}},
		{name: "every", fields: "schedule: \"@every 5m\"\ncatch_up: all\n", want: &Schedule{Cron: "@every 5m", CatchUp: CatchUpAll}},
		{name: "descriptor and zone", fields: "schedule: \"@daily\"\ntimezone: Europe/Berlin\n", want: &Schedule{Cron: "@daily", Timezone: "Europe/Berlin", CatchUp: CatchUpLatest}},
		{name: "none", fields: ""},
		// Sunday is 0 or 7, as in Vixie cron.
		{name: "sunday as 7", fields: "schedule: \"0 9 * * 7\"\n", want: &Schedule{Cron: "0 9 * * 7", CatchUp: CatchUpLatest}},
		{name: "range to 7", fields: "schedule: \"0 9 * * 5-7,mon-7/3\"\n", want: &Schedule{Cron: "0 9 * * 5-7,mon-7/3", CatchUp: CatchUpLatest}},
		{name: "range to Sunday's name", fields: "schedule: \"0 9 * * mon-sun,fri-SUN/2\"\n", want: &Schedule{Cron: "0 9 * * mon-sun,fri-SUN/2", CatchUp: CatchUpLatest}},
		{name: "day of week 8", fields: "schedule: \"0 9 * * 1-8\"\n", diags: []string{
			`4:11: error: schedule "0 9 * * 1-8" is not valid: end of range (8) above maximum (6): 1-8; the day of week is 0-6 from Sunday (0), or 7 for Sunday`}},
		// A step larger than its field's range selects one value.
		{name: "every 90 minutes", fields: "schedule: \"*/90 * * * *\"\n", want: &Schedule{Cron: "*/90 * * * *", CatchUp: CatchUpLatest}, diags: []string{
			`4:11: warning: schedule "*/90 * * * *": */90 in the minute field fires only at minute 0 of every hour, not every 90 minutes: a step counts within the field's range, 0-59 (hint: every 90 minutes cannot be written in cron; write @every 1h30m`}},
		{name: "every 36 hours", fields: "schedule: \"0 */36 * * *\"\n", want: &Schedule{Cron: "0 */36 * * *", CatchUp: CatchUpLatest}, diags: []string{
			`4:11: warning: schedule "0 */36 * * *": */36 in the hour field fires only at 00:00 every day, not every 36 hours: a step counts within the field's range, 0-23 (hint: every 36 hours cannot be written in cron; write @every 36h (counted from the previous tick), or 0 0 * * * for daily)`}},
		{name: "step from a start", fields: "schedule: \"10/70 * * * *\"\n", want: &Schedule{Cron: "10/70 * * * *", CatchUp: CatchUpLatest}, diags: []string{
			`4:11: warning: schedule "10/70 * * * *": 10/70 in the minute field fires only at minute 10 of every hour: a step counts within its range, 10-59 (hint: write 10 in place of 10/70 if that is meant)`}},
		{name: "every 45 days", fields: "schedule: \"0 0 */45 * *\"\n", want: &Schedule{Cron: "0 0 */45 * *", CatchUp: CatchUpLatest}, diags: []string{
			`4:11: warning: schedule "0 0 */45 * *": */45 in the day-of-month field fires only on day 1 of every month, not every 45 days`}},
		{name: "weekly step", fields: "schedule: \"0 0 * * */7\"\n", want: &Schedule{Cron: "0 0 * * */7", CatchUp: CatchUpLatest}, diags: []string{
			`4:11: warning: schedule "0 0 * * */7": */7 in the day-of-week field fires only on day 0 of every week (sun), not every 7 days: a step counts within the field's range, 0-6`}},
		{name: "weekday step to Sunday", fields: "schedule: \"0 0 * * 5-7/3\"\n", want: &Schedule{Cron: "0 0 * * 5-7/3", CatchUp: CatchUpLatest}, diags: []string{
			`4:11: warning: schedule "0 0 * * 5-7/3": 5-7/3 in the day-of-week field fires only on day 5 of every week (fri): a step counts within its range, 5-7 (hint: write 5 in place of 5-7/3 if that is meant)`}},
		// A step that does not divide the hour or the day is uneven where the field starts again.
		{name: "every 45 minutes", fields: "schedule: \"*/45 * * * *\"\n", want: &Schedule{Cron: "*/45 * * * *", CatchUp: CatchUpLatest}, diags: []string{
			`4:11: warning: schedule "*/45 * * * *": */45 in the minute field fires every 45 minutes from 0 to 45, then 15 minutes later at the next hour's 0: the field starts again at 0, so its runs are not all 45 minutes apart (hint: write @every 45m for every 45 minutes (counted from the previous tick), or a step that divides 60)`}},
		{name: "every 5 hours", fields: "schedule: \"30 */5 * * *\"\n", want: &Schedule{Cron: "30 */5 * * *", CatchUp: CatchUpLatest}, diags: []string{
			`4:11: warning: schedule "30 */5 * * *": */5 in the hour field fires every 5 hours from 0 to 20, then 4 hours later at the next day's 0: the field starts again at 0, so its runs are not all 5 hours apart (hint: write @every 5h for every 5 hours`}},
		{name: "steps that divide", fields: "schedule: \"*/20 */6 * * *\"\n", want: &Schedule{Cron: "*/20 */6 * * *", CatchUp: CatchUpLatest}},
		{name: "steps that fit", fields: "schedule: \"0-59/59 0-12/12 1-31/30 jan-dec/11 1-7/6\"\n",
			want: &Schedule{Cron: "0-59/59 0-12/12 1-31/30 jan-dec/11 1-7/6", CatchUp: CatchUpLatest}},
		{name: "six fields", fields: "schedule: \"0 */5 * * * *\"\n", diags: []string{`4:11: error: schedule "0 */5 * * * *" is not valid: expected exactly 5 fields`}},
		{name: "bad field", fields: "schedule: \"61 * * * *\"\n", diags: []string{`4:11: error: schedule "61 * * * *" is not valid: end of range (61) above maximum (59)`}},
		{name: "no such day", fields: "schedule: \"0 0 30 2 *\"\n", diags: []string{`4:11: error: schedule "0 0 30 2 *" is not valid: it never fires`}},
		{name: "every too short", fields: "schedule: \"@every 500ms\"\n", diags: []string{`4:11: error: schedule "@every 500ms" is not valid: @every 500ms: the interval must be whole seconds`}},
		{name: "every no duration", fields: "schedule: \"@every soon\"\n", diags: []string{`4:11: error: schedule "@every soon" is not valid: @every needs a duration`}},
		{name: "zone in expression", fields: "schedule: \"CRON_TZ=UTC 0 * * * *\"\n", diags: []string{`4:11: error: schedule "CRON_TZ=UTC 0 * * * *" is not valid: a time zone inside the expression`}},
		{name: "not a string", fields: "schedule: [a]\n", diags: []string{"4:11: error: schedule must be"}},
		{name: "bad zone", fields: "schedule: \"@hourly\"\ntimezone: Mars/Olympus\n", diags: []string{`5:11: error: timezone "Mars/Olympus": not an IANA time zone`}},
		{name: "local zone", fields: "schedule: \"@hourly\"\ntimezone: Local\n", diags: []string{`5:11: error: timezone "Local": not an IANA time zone`}},
		{name: "zone case", fields: "schedule: \"@hourly\"\ntimezone: europe/Berlin\n", diags: []string{`5:11: error: timezone "europe/Berlin": not an IANA time zone (hint: did you mean Europe/Berlin?)`}},
		// Any zone Go knows, in another case or with spaces, a letter off, as
		// an abbreviation or as a city alone, is suggested in its spelling.
		{name: "zone all lower case", fields: "schedule: \"@hourly\"\ntimezone: america/new_york\n", diags: []string{`5:11: error: timezone "america/new_york": not an IANA time zone (hint: did you mean America/New_York?)`}},
		{name: "zone lower case elsewhere", fields: "schedule: \"@hourly\"\ntimezone: indian/maldives\n", diags: []string{`5:11: error: timezone "indian/maldives": not an IANA time zone (hint: did you mean Indian/Maldives?)`}},
		{name: "zone with a space", fields: "schedule: \"@hourly\"\ntimezone: America/Sao Paulo\n", diags: []string{`5:11: error: timezone "America/Sao Paulo": not an IANA time zone (hint: did you mean America/Sao_Paulo?)`}},
		{name: "zone misspelt", fields: "schedule: \"@hourly\"\ntimezone: Europe/Berlim\n", diags: []string{`5:11: error: timezone "Europe/Berlim": not an IANA time zone (hint: did you mean Europe/Berlin?)`}},
		{name: "zone abbreviation", fields: "schedule: \"@hourly\"\ntimezone: PST\n", diags: []string{`5:11: error: timezone "PST": not an IANA time zone (hint: did you mean America/Los_Angeles?)`}},
		{name: "zone city", fields: "schedule: \"@hourly\"\ntimezone: tokyo\n", diags: []string{`5:11: error: timezone "tokyo": not an IANA time zone (hint: did you mean Asia/Tokyo?)`}},
		// EST, MST and HST are fixed offsets, without daylight saving.
		{name: "EST", fields: "schedule: \"30 2 * * *\"\ntimezone: EST\n", want: &Schedule{Cron: "30 2 * * *", Timezone: "EST", CatchUp: CatchUpLatest},
			diags: []string{"5:11: warning: timezone EST is UTC-5 all year, without daylight saving: from March to November its ticks come an hour late by New York's clocks (hint: write America/New_York for US Eastern time, or America/Panama for UTC-5 all year)"}},
		{name: "MST", fields: "schedule: \"@daily\"\ntimezone: MST\n", want: &Schedule{Cron: "@daily", Timezone: "MST", CatchUp: CatchUpLatest},
			diags: []string{"5:11: warning: timezone MST is UTC-7 all year, without daylight saving"}},
		{name: "HST", fields: "schedule: \"@daily\"\ntimezone: HST\n", want: &Schedule{Cron: "@daily", Timezone: "HST", CatchUp: CatchUpLatest},
			diags: []string{"5:11: warning: timezone HST is a legacy abbreviation, UTC-10 all year (hint: write Pacific/Honolulu"}},
		// Etc/GMT+5 is UTC-5: POSIX's sign.
		{name: "Etc/GMT+5", fields: "schedule: \"@daily\"\ntimezone: Etc/GMT+5\n", want: &Schedule{Cron: "@daily", Timezone: "Etc/GMT+5", CatchUp: CatchUpLatest},
			diags: []string{"5:11: warning: timezone Etc/GMT+5 is UTC-5 all year: the Etc zones' signs are POSIX's, the opposite of ISO 8601's (hint: if UTC+5 is meant, write Etc/GMT-5, or better a region's name (America/New_York))"}},
		{name: "Etc/GMT", fields: "schedule: \"@daily\"\ntimezone: Etc/GMT\n", want: &Schedule{Cron: "@daily", Timezone: "Etc/GMT", CatchUp: CatchUpLatest}},
		{name: "EST5EDT", fields: "schedule: \"@daily\"\ntimezone: EST5EDT\n", want: &Schedule{Cron: "@daily", Timezone: "EST5EDT", CatchUp: CatchUpLatest}},
		{name: "bad catch_up", fields: "schedule: \"@hourly\"\ncatch_up: every\n", diags: []string{`5:11: error: catch_up "every" is not valid`}},
		{name: "zone without schedule", fields: "timezone: UTC\n", diags: []string{"4:1: error: timezone needs a schedule"}},
		{name: "catch_up without schedule", fields: "catch_up: all\n", diags: []string{"4:1: error: catch_up needs a schedule"}},
		{name: "zone on every", fields: "schedule: \"@every 1h\"\ntimezone: UTC\n", want: &Schedule{Cron: "@every 1h", Timezone: "UTC", CatchUp: CatchUpLatest},
			diags: []string{"5:1: warning: timezone has no effect on @every"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, ok := parseExpecting(t, "skills/nightly/SKILL.md", md(tt.fields), tt.diags)
			if !ok {
				return
			}
			if diff := cmp.Diff(tt.want, s.Schedule); diff != "" {
				t.Errorf("schedule (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScheduleInSkillYAML(t *testing.T) {
	t.Parallel()
	_, ds := ParseWorkflow("skills/x/skill.yaml", []byte("name: x\ndescription: d\nschedule: \"* * *\"\nsteps:\n- id: a\n  tool: log\n  args: {message: hi}\n"))
	if len(ds) == 0 || !strings.HasPrefix(ds[0].String(), `skills/x/skill.yaml:3:11: error: schedule "* * *" is not valid`) {
		t.Fatalf("diagnostics %v", ds)
	}
}

// A scheduled workflow declares the input each tick gives, and requires no other.
func TestScheduleWorkflowInputs(t *testing.T) {
	t.Parallel()
	const steps = "steps:\n- id: a\n  tool: log\n  args: {message: hi}\n"
	tests := []struct {
		name, inputs string
		want         []string
	}{
		{"no inputs", "", nil},
		{"declared", "inputs:\n- name: scheduled_at\n  type: string\n- name: depth\n  type: integer\n  default: 2\n", nil},
		{"any", "inputs:\n- name: \"*\"\n", nil},
		{"undeclared", "inputs:\n- name: depth\n  type: integer\n", []string{
			`skills/x/skill.yaml:3:11: error: each tick's data is {"scheduled_at": <time>}, an input the workflow does not declare`}},
		{"required other", "inputs:\n- name: scheduled_at\n- name: repo\n  required: true\n", []string{
			"skills/x/skill.yaml:3:11: error: input repo is required, but a tick gives only scheduled_at"}},
		{"wrong type", "inputs:\n- name: scheduled_at\n  type: integer\n", []string{
			"skills/x/skill.yaml:3:11: error: each tick gives input scheduled_at as an RFC 3339 string, but it is declared as integer"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ds := ParseWorkflow("skills/x/skill.yaml", []byte("name: x\ndescription: d\nschedule: \"@hourly\"\n"+tt.inputs+steps))
			var got []string
			for _, d := range ds {
				got = append(got, d.String())
			}
			if len(got) != len(tt.want) {
				t.Fatalf("diagnostics %q, want %q", got, tt.want)
			}
			for i := range got {
				if !strings.HasPrefix(got[i], tt.want[i]) {
					t.Errorf("diagnostic %q, want it to start %q", got[i], tt.want[i])
				}
			}
		})
	}
}

func TestScheduleTicks(t *testing.T) {
	t.Parallel()
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	tests := []struct {
		sched Schedule
		after string
		want  []string
	}{
		{Schedule{Cron: "*/15 * * * *"}, "2026-03-01T10:07:00Z", []string{"2026-03-01T10:15:00Z", "2026-03-01T10:30:00Z"}},
		{Schedule{Cron: "@hourly"}, "2026-03-01T10:00:00Z", []string{"2026-03-01T11:00:00Z", "2026-03-01T12:00:00Z"}},
		{Schedule{Cron: "@every 90s"}, "2026-03-01T10:00:00Z", []string{"2026-03-01T10:01:30Z", "2026-03-01T10:03:00Z"}},
		// 09:00 in Berlin is 08:00 UTC in winter and 07:00 UTC in summer (DST from 29 March 2026).
		{Schedule{Cron: "0 9 * * *", Timezone: "Europe/Berlin"}, "2026-03-28T00:00:00Z", []string{"2026-03-28T08:00:00Z", "2026-03-29T07:00:00Z"}},
		// Sunday is 7 as well as 0; 1 March 2026 is a Sunday.
		{Schedule{Cron: "0 9 * * 7"}, "2026-03-01T10:00:00Z", []string{"2026-03-08T09:00:00Z", "2026-03-15T09:00:00Z"}},
		{Schedule{Cron: "0 9 * * 6-7"}, "2026-03-01T10:00:00Z", []string{"2026-03-07T09:00:00Z", "2026-03-08T09:00:00Z"}},
		{Schedule{Cron: "0 9 * * 3-7/2"}, "2026-03-01T10:00:00Z", []string{"2026-03-04T09:00:00Z", "2026-03-06T09:00:00Z", "2026-03-08T09:00:00Z", "2026-03-11T09:00:00Z"}},
		// A range may end at Sunday's name; sun-sun is Sunday only.
		{Schedule{Cron: "0 9 * * fri-sun"}, "2026-03-01T10:00:00Z", []string{"2026-03-06T09:00:00Z", "2026-03-07T09:00:00Z", "2026-03-08T09:00:00Z", "2026-03-13T09:00:00Z"}},
		{Schedule{Cron: "0 9 * * sun-sun"}, "2026-03-01T10:00:00Z", []string{"2026-03-08T09:00:00Z", "2026-03-15T09:00:00Z"}},
		// A machine in another zone reads a zone-less schedule in UTC.
		{Schedule{Cron: "@daily"}, "2026-03-01T10:00:00+05:00", []string{"2026-03-02T00:00:00Z", "2026-03-03T00:00:00Z"}},
	}
	for _, tt := range tests {
		tt := tt
		t.Run(tt.sched.Cron, func(t *testing.T) {
			t.Parallel()
			tab, err := tt.sched.Compile()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for n, c := 0, at(tt.after); n < len(tt.want); n++ {
				c = tab.Next(c)
				got = append(got, c.UTC().Format(time.RFC3339))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ticks (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := (Schedule{Cron: "@hourly", Timezone: "Nowhere/Atlantis"}).Compile(); err == nil {
		t.Error("a schedule in an unknown zone compiled")
	}
}

// FuzzSchedule: a schedule the parser accepts compiles, and its ticks move forward.
func FuzzSchedule(f *testing.F) {
	for _, s := range []string{"*/15 * * * *", "@hourly", "@every 5m", "0 9 * * 1-5", "0 0 30 2 *", "@every 0s", "CRON_TZ=UTC * * * * *", "5 4 * * sun", "0 9 * * 5-7", "0 0 * * 1-7/3,7", "*/90 * * * *", "5/70 */36 */45 */13 */7", "@every -1s", "? ? ? ? ?"} {
		f.Add(s, "Europe/Berlin")
	}
	f.Fuzz(func(t *testing.T, spec, zone string) {
		data := []byte("---\nname: x\ndescription: d\nschedule: " + strconvQuote(spec) + "\ntimezone: " + strconvQuote(zone) + "\n---\nCompact the nightly logs of every service and report how much space was freed.\n")
		s, ds := ParseSkillMD("fuzz/SKILL.md", data)
		if ds.HasErrors() || s.Schedule == nil {
			return
		}
		tab, err := s.Schedule.Compile()
		if err != nil {
			t.Fatalf("accepted schedule %+v does not compile: %v", s.Schedule, err)
		}
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if next := tab.Next(from); !next.IsZero() && !next.After(from) {
			t.Fatalf("next tick %v is not after %v", next, from)
		}
	})
}

func strconvQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f || r > 0xffff:
			b.WriteString("\\u0020")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// zoneNames are the zones Go knows: each loads, and none of Go's is missing.
func TestZoneNames(t *testing.T) {
	t.Parallel()
	for _, z := range zoneNames {
		if _, err := time.LoadLocation(z); err != nil {
			t.Errorf("zone %s: %v", z, err)
		}
	}
	root, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	zr, err := zip.OpenReader(filepath.Join(strings.TrimSpace(string(root)), "lib", "time", "zoneinfo.zip"))
	if err != nil {
		t.Fatalf("Go's zones: %v", err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if !slices.Contains(zoneNames, f.Name) {
			t.Errorf("zone %s is not in zoneNames: make zones.go again, as it says", f.Name)
		}
	}
}
