package events

import "testing"

// A debounced run's subject is told from an explicit invocation and from a
// trigger of type skill.<name>.debounced on its own subject alike: both are
// under trigger.skill, and only the routers may publish it.
func TestSkillFromDebounced(t *testing.T) {
	t.Parallel()
	s := Subjects{Prefix: "acme"}
	for _, c := range []struct {
		subject, name string
		ok            bool
	}{
		{s.TriggerDebounced("digest"), "digest", true},
		{s.TriggerSkill("digest"), "", false},
		{"acme.trigger.com.example.debounced", "", false},
		{"acme.trigger.skill.a.b.debounced", "", false},
		{"acme.trigger.skill..debounced", "", false},
		{"skillbus.trigger.skill.digest.debounced", "", false},
	} {
		name, ok := s.SkillFromDebounced(c.subject)
		if name != c.name || ok != c.ok {
			t.Errorf("SkillFromDebounced(%q) = %q, %v; want %q, %v", c.subject, name, ok, c.name, c.ok)
		}
	}
	if w := s.TriggersDebounced(); w != "acme.trigger.skill.*.debounced" {
		t.Errorf("TriggersDebounced = %q", w)
	}
}

// skillbus's own triggers have a subject of their own, and their sources are told
// apart however a binding encoded them.
func TestInternalTriggers(t *testing.T) {
	t.Parallel()
	s := Subjects{Prefix: "acme"}
	for _, c := range []struct {
		subject, name string
		ok            bool
	}{
		{s.TriggerInternal("digest"), "digest", true},
		{s.TriggerSkill("digest"), "", false},
		{s.TriggerDebounced("digest"), "", false},
		{"acme.trigger.com.example.internal", "", false},
		{"acme.trigger.skill.a.b.internal", "", false},
		{"skillbus.trigger.skill.digest.internal", "", false},
	} {
		name, ok := s.SkillFromInternal(c.subject)
		if name != c.name || ok != c.ok {
			t.Errorf("SkillFromInternal(%q) = %q, %v; want %q, %v", c.subject, name, ok, c.name, c.ok)
		}
	}
	if w := s.TriggersInternal(); w != "acme.trigger.skill.*.internal" {
		t.Errorf("TriggersInternal = %q", w)
	}
	for src, want := range map[string]bool{
		"/skillbus/scheduler": true, "/skillbus%2Fskill-tool": true, "%2Fskillbus/x": true, "/skillbus/": true,
		"skillbus:trigger-seq": true, "skillbus%3Adlq/x": true, "skillbus-cli": false, "skillbus-client": false,
		"/skillbus": false, "/skillbusx/a": false, "/shop": false, "https://x.io/skillbus/": false, "": false,
	} {
		if got := IsReservedSource(src); got != want {
			t.Errorf("IsReservedSource(%q) = %v, want %v", src, got, want)
		}
	}
}

// AppendExec writes what Exec returns, after what the buffer held.
func TestAppendExec(t *testing.T) {
	t.Parallel()
	s := Subjects{Prefix: "acme"}
	for _, c := range [][4]string{{"default", "hello", "0123abcd", StagePlan}, {"gpu~p2", "x", "", StageFallback}} {
		if got, want := string(s.AppendExec([]byte("id:"), c[0], c[1], c[2], c[3])), "id:"+s.Exec(c[0], c[1], c[2], c[3]); got != want {
			t.Errorf("AppendExec%q = %s, want %s", c, got, want)
		}
	}
}

// TimerOf knows the subjects of scheduled timers from those of
func TestTimerOf(t *testing.T) {
	t.Parallel()
	s := Subjects{Prefix: "skillbus"}
	for subj, want := range map[string]string{
		s.WaitTimer("abc", "nap"):                     TimerWait,
		s.ConfirmationTimeout("abc", "create"):        TimerConfirmation,
		s.ConfirmationTimeout("abc", "*"):             TimerConfirmation,
		s.Event("abc", TypeWaitEnded):                 "",
		s.Event("abc", TypeConfirmationRecorded):      "",
		s.Event("abc", TypeStepCompleted):             "",
		"skillbus.trigger.com.example.wait.timer.x":   "",
		(Subjects{Prefix: "a.b"}).WaitTimer("x", "y"): TimerWait,
	} {
		if got := TimerOf(subj); got != want {
			t.Errorf("TimerOf(%q) = %q, want %q", subj, got, want)
		}
	}
}
