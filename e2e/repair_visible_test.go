package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/natstest"
)

// A run parked for a repair shows in every view of a run the moment it parks:
// trigger --wait says so and exits 5 instead of waiting out its timeout, runs
// list lists it, runs show (by a prefix of its id) shows it, and so does the
// console's page of the run. Approved, the same execution completes.
func TestParkedRunInEveryView(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "issue-title"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "issue-title", "skill.yaml"), []byte(renamedKeySkill), 0o644); err != nil {
		t.Fatal(err)
	}
	ui := "127.0.0.1:" + strconv.Itoa(natstest.FreePort(t))
	_, port, _ := startDev(t, "--store", t.TempDir(), "--skills", dir, "--ui", ui)
	url := "--nats-url=nats://127.0.0.1:" + strconv.Itoa(port)

	start := time.Now()
	out, code := skillbus(t, "trigger", "--skill", "issue-title", "--data", `{"name":"x"}`, "--wait", "--timeout=45s", url)
	if code != 5 {
		t.Fatalf("trigger --wait: exit %d, want 5 (parked on a repair)\n%s", code, out)
	}
	if took := time.Since(start); took > 30*time.Second {
		t.Errorf("trigger --wait took %v: it should end when the patch is proposed, not at its timeout", took)
	}
	line := regexp.MustCompile(`repairing: reference fault "titel" in step post, repair ([0-9a-f]{12}) waiting for approval`)
	m := line.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("trigger --wait does not say the run waits for a repair's approval:\n%s", out)
	}
	repairID := m[1]
	if !strings.Contains(out, "skillbus repair approve "+repairID) {
		t.Errorf("trigger --wait does not say how to approve:\n%s", out)
	}
	list, code := skillbus(t, "runs", "list", url)
	if code != 0 || !strings.Contains(list, "repairing") || !strings.Contains(list, "issue-title") || !strings.Contains(list, repairID+" waiting for approval") {
		t.Fatalf("runs list (exit %d) does not list the parked run:\n%s", code, list)
	}
	id := regexp.MustCompile(`(?m)^([0-9a-f]{32})\s+issue-title\s+\S+\s+repairing`).FindStringSubmatch(list)
	if id == nil {
		t.Fatalf("no execution id in runs list:\n%s", list)
	}
	show, code := skillbus(t, "runs", "show", id[1][:8], url)
	if code != 0 || !line.MatchString(show) || !strings.Contains(show, "skillbus repair show "+repairID) {
		t.Fatalf("runs show (exit %d) does not show the parked run:\n%s", code, show)
	}

	resp, err := http.Get("http://" + ui + "/runs/" + id[1])
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `id="repairing"`) ||
		!strings.Contains(string(page), "repairing: reference fault &#34;titel&#34; in step post, repair "+repairID+" waiting for approval") {
		t.Fatalf("the console's run page (%d) does not show the parked run:\n%s", resp.StatusCode, page)
	}

	// Approved, the parked execution runs again on the repaired version.
	if out, code := skillbus(t, "repair", "approve", repairID, "--by", "test", url); code != 0 {
		t.Fatalf("repair approve: exit %d\n%s", code, out)
	}
	natstest.Eventually(t, 60*time.Second, func() bool {
		show, _ = skillbus(t, "runs", "show", id[1], url)
		return strings.Contains(show, "after repair")
	}, "the approved run did not complete:\n%s", show)
	if list, _ := skillbus(t, "runs", "list", url); strings.Contains(list, "repairing") {
		t.Errorf("runs list still shows the run as repairing after it completed:\n%s", list)
	}
}
