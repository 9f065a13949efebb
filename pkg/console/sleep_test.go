package console

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
)

// The wake-up a sleeping run scheduled is shown as scheduled, at the time it was
// written, with the time it is due: it is not an event that happened.
func TestASleepingRunsWakeUpIsShownAsScheduled(t *testing.T) {
	t.Parallel()
	f := startFleet(t, nil)
	start := time.Now()
	exec := f.trigger("com.example.nap", "napper", "hello")
	var body string
	natstest.Eventually(t, 30*time.Second, func() bool {
		_, body = get(t, http.DefaultClient, f.srv.URL+"/runs/"+exec)
		// The run record and the scheduled wake-up in the events stream are
		// two writes: the page shows each as it lands.
		return strings.Contains(body, "sleeping until") && strings.Contains(body, "<b>wait.ended (scheduled)</b>")
	}, "the run page never showed the run sleeping with its scheduled wake-up")
	if strings.Contains(body, "<b>wait.ended</b>") {
		t.Fatalf("run page shows the scheduled wake-up as an event that happened:\n%s", body)
	}
	m := regexp.MustCompile(`due=(\S+)`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the scheduled wake-up does not say when it is due:\n%s", body)
	}
	due, err := time.Parse(time.RFC3339, m[1])
	if err != nil || due.Before(start.Add(time.Hour)) || due.After(time.Now().Add(time.Hour+2*time.Second)) {
		t.Fatalf("due %q (%v), want about an hour from %v", m[1], err, start)
	}
}
