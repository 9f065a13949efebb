package bus_test

import (
	"testing"
	"time"

	"github.com/skillbus/skillbus/events"
	"github.com/skillbus/skillbus/pkg/bus"
)

func BenchmarkEventMsg(b *testing.B) {
	ev := bus.Event{ID: "0123456789abcdef0123456789abcdef.12.1.step.x.completed", Source: "/skillbus/worker", Type: events.TypeStepCompleted,
		Meta: bus.Meta{CorrelationID: "0123456789abcdef0123456789abcdef", CausationID: "x.job", ExecutionID: "0123456789abcdef0123456789abcdef"},
		Data: events.StepCompleted{ExecutionID: "0123456789abcdef0123456789abcdef", StepID: "fetch", Success: true, Status: "completed",
			Result: map[string]any{"status": int64(200), "body": map[string]any{"items": []any{1, 2, 3}}}, Started: time.Now(), Finished: time.Now(), Attempt: 1, SkillRef: "three@111111111111"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ev.Msg("skillbus.events.x.step.completed"); err != nil {
			b.Fatal(err)
		}
	}
}
