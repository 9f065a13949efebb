package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/skillbus/skillbus/internal/cli"
	"github.com/skillbus/skillbus/internal/natstest"
	"github.com/skillbus/skillbus/pkg/bus"
	"github.com/skillbus/skillbus/pkg/registry"
)

const fixtures = "../../testdata/skills-fixtures"

func skillbus(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := cli.Skillbus(ctx, args, noEnv, &out, &out)
	return out.String(), err
}

func TestValidate(t *testing.T) {
	t.Parallel()
	compiler := regexp.MustCompile(`(?m)^\S+:\d+:\d+: error: .+$`)
	tests := []struct {
		name  string
		args  []string
		code  int
		check func(t *testing.T, out string)
	}{
		{"good skills", []string{filepath.Join(fixtures, "good")}, 0, func(t *testing.T, out string) {
			if !strings.Contains(out, "skills valid in") || !strings.Contains(out, "0 errors") {
				t.Errorf("output:\n%s", out)
			}
		}},
		{"the seeds and the example skills together", []string{"../../testdata/skills", filepath.Join(fixtures, "seeds", "004")}, 0, nil},
		{"bad front matter", []string{filepath.Join(fixtures, "bad", "md")}, 1, func(t *testing.T, out string) {
			if !compiler.MatchString(out) || !strings.Contains(out, "(hint: ") {
				t.Errorf("no compiler-style errors with hints:\n%s", out)
			}
		}},
		{"bad workflows", []string{filepath.Join(fixtures, "bad", "yaml", "templates.yaml")}, 1, func(t *testing.T, out string) {
			if !strings.Contains(out, "templates.yaml:") || !strings.Contains(out, "did you mean") {
				t.Errorf("output:\n%s", out)
			}
		}},
		{"bad directories", []string{filepath.Join(fixtures, "bad", "dirs")}, 1, nil},
		{"a dependency cycle", []string{filepath.Join(fixtures, "catalog", "root1")}, 1, func(t *testing.T, out string) {
			if !strings.Contains(out, "dependency cycle: cycle-a → cycle-b → cycle-c → cycle-a") {
				t.Errorf("output:\n%s", out)
			}
		}},
		{"warnings only pass", []string{filepath.Join(fixtures, "bad", "md", "unknown-keys.md")}, 0, func(t *testing.T, out string) {
			if !strings.Contains(out, ": warning: ") || !strings.Contains(out, "0 errors, 4 warnings") {
				t.Errorf("output:\n%s", out)
			}
		}},
		{"warnings fail with --strict", []string{"--strict", filepath.Join(fixtures, "bad", "md", "unknown-keys.md")}, 1, nil},
		{"unknown tools with --known-tools", []string{"--known-tools", "echo", filepath.Join(fixtures, "good", "triage-issue")}, 1, func(t *testing.T, out string) {
			if !strings.Contains(out, "error: ") {
				t.Errorf("output:\n%s", out)
			}
		}},
		// A skill's own file stands for its directory: the name and description are in
		// the SKILL.md, the steps in the skill.yaml.
		{"a skill.yaml", []string{filepath.Join(fixtures, "good", "triage-issue", "skill.yaml")}, 0, func(t *testing.T, out string) {
			if !strings.Contains(out, "1 skill valid in ") || !strings.Contains(out, ": 0 errors") {
				t.Errorf("output:\n%s", out)
			}
		}},
		{"a SKILL.md", []string{filepath.Join(fixtures, "good", "triage-issue", "SKILL.md"), "--json"}, 0, func(t *testing.T, out string) {
			var resp registry.ValidateResponse
			if err := json.Unmarshal([]byte(out), &resp); err != nil || resp.Errors != 0 || !slices.Equal(resp.Skills, []string{"triage-issue"}) {
				t.Errorf("output:\n%s", out)
			}
			for _, d := range resp.Diagnostics {
				if strings.Contains(d.Message, "differs from its file name") {
					t.Errorf("read as a single-file skill: %s", d)
				}
			}
		}},
		{"no PATH", nil, 2, nil},
		{"a PATH that does not exist", []string{"/nonexistent/skills"}, 2, nil},
		{"a directory without skills", []string{t.TempDir()}, 1, func(t *testing.T, out string) {
			if !strings.Contains(out, "no skills found") {
				t.Errorf("output:\n%s", out)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := skillbus(t, append([]string{"skills", "validate"}, tt.args...)...)
			if code := cli.ExitCode(err); code != tt.code {
				t.Fatalf("exit code %d, want %d (%v):\n%s", code, tt.code, err, out)
			}
			if tt.check != nil {
				tt.check(t, out)
			}
		})
	}
}

func TestValidateJSON(t *testing.T) {
	t.Parallel()
	out, err := skillbus(t, "skills", "validate", "--json", filepath.Join(fixtures, "bad", "md"), filepath.Join(fixtures, "good"))
	if cli.ExitCode(err) != 1 {
		t.Fatalf("exit code %d: %v", cli.ExitCode(err), err)
	}
	var resp registry.ValidateResponse
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if resp.Valid || resp.Errors == 0 || resp.Warnings == 0 || len(resp.Skills) < 7 {
		t.Fatalf("verdict %+v", resp)
	}
	d := resp.Diagnostics[0]
	if d.File == "" || d.Line == 0 || d.Severity == "" || d.Message == "" {
		t.Errorf("first diagnostic %+v", d)
	}
	out, err = skillbus(t, "skills", "validate", "--json", filepath.Join(fixtures, "good"))
	if err != nil || !strings.Contains(out, `"valid": true`) {
		t.Fatalf("good: %v\n%s", err, out)
	}
}

// catalogServer runs NATS with a registry over the example skills, serving or not.
func catalogServer(t *testing.T, serve bool) (url string, reg *registry.Registry, dir string) {
	t.Helper()
	return catalogServerWith(t, serve, nil)
}

// catalogServerWith is catalogServer with more files (path: content) in the skills
// directory.
func catalogServerWith(t *testing.T, serve bool, files map[string]string) (url string, reg *registry.Registry, dir string) {
	t.Helper()
	srv := natstest.Start(t)
	b := srv.Bus(t, bus.Config{})
	dir = t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../../testdata/skills")); err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		p = filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := registry.New(registry.Config{Bus: b, Roots: []string{dir}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Debounce: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if serve {
		err = reg.Start(ctx)
	} else {
		_, err = reg.Sync(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL(), reg, dir
}

func TestSkillsAgainstACatalog(t *testing.T) {
	t.Parallel()
	for _, serve := range []bool{true, false} {
		name := "from the service"
		if !serve {
			name = "from the bucket, no registry answering"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			url, _, _ := catalogServer(t, serve)
			run := func(args ...string) (string, error) {
				return skillbus(t, append(args, "--nats-url", url)...)
			}
			out, err := run("skills", "list")
			if err != nil || !strings.Contains(out, "STATE") || !strings.Contains(out, "hello") || !strings.Contains(out, "com.example.order.created") {
				t.Errorf("list: %v\n%s", err, out)
			}
			out, err = run("skills", "list", "--json")
			var infos []registry.SkillInfo
			if err != nil || json.Unmarshal([]byte(out), &infos) != nil || len(infos) != exampleSkills(t) || infos[0].State != registry.StateOK {
				t.Errorf("list --json: %v\n%s", err, out)
			}

			out, err = run("skills", "show", "hello")
			if err != nil || !strings.Contains(out, "name:") || !strings.Contains(out, "steps:") || !strings.Contains(out, "compose (compute)") ||
				!strings.Contains(out, "versions:") || strings.Contains(out, "\n---\n") {
				t.Errorf("show: %v\n%s", err, out)
			}
			out, err = run("skills", "show", "hello", "--body")
			if err != nil || !strings.Contains(out, "\n---\n") || !strings.Contains(out, "# ") {
				t.Errorf("show --body: %v\n%s", err, out)
			}
			out, err = run("skills", "show", "hello", "--json", "--body")
			var got registry.GetResponse
			if err != nil || json.Unmarshal([]byte(out), &got) != nil || got.Skill.Name != "hello" || got.Skill.Body == "" || len(got.Versions) != 1 {
				t.Errorf("show --json: %v\n%s", err, out)
			}
			if out, err = run("skills", "show", "nosuch"); cli.ExitCode(err) != 1 || !strings.Contains(err.Error(), "not in the catalog") {
				t.Errorf("show nosuch: %v\n%s", err, out)
			}
			if _, err = run("skills", "show", "Bad Name"); cli.ExitCode(err) != 2 {
				t.Errorf("show 'Bad Name': %v", err)
			}

			out, err = run("skills", "search", "--trigger", "com.example.order.created")
			if err != nil || !strings.Contains(out, "reserve-stock") || !strings.Contains(out, "queue-backorder") || strings.Contains(out, "hello") {
				t.Errorf("search --trigger: %v\n%s", err, out)
			}
			out, err = run("skills", "search", "hello", "--json")
			var res []registry.SearchResult
			if err != nil || json.Unmarshal([]byte(out), &res) != nil || len(res) == 0 || res[0].Name != "hello" {
				t.Errorf("search hello: %v\n%s", err, out)
			}
			if out, err = run("skills", "search", "zzzqqq"); err != nil || !strings.Contains(out, "no skill matches") {
				t.Errorf("search without a match: %v\n%s", err, out)
			}
			if _, err = run("skills", "search"); cli.ExitCode(err) != 2 {
				t.Errorf("search without a query: %v", err)
			}
			if _, err = run("skills", "search", "--trigger", "a.>.b"); cli.ExitCode(err) != 2 {
				t.Errorf("search with a bad pattern: %v", err)
			}
		})
	}
}

// Triggers that are words and phrases show in list, show and search, with the
// event types, whether a registry answers or the bucket is read.
func TestSkillsShowTriggerPhrases(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"pack/SKILL.md": "---\nname: pack\ndescription: Makes a packing list for a trip.\n" +
			"triggers: [packing list, what to pack, suitcase]\n---\n\nList what to pack.\n",
		"phrases-only/SKILL.md": "---\nname: phrases-only\ndescription: Only phrases trigger it.\n" +
			"triggers: [book a table, reserve dinner]\n---\n\nBook it.\n",
	}
	for _, serve := range []bool{true, false} {
		t.Run(fmt.Sprintf("registry answers=%v", serve), func(t *testing.T) {
			t.Parallel()
			url, _, _ := catalogServerWith(t, serve, files)
			run := func(args ...string) string {
				t.Helper()
				out, err := skillbus(t, append(args, "--nats-url", url)...)
				if err != nil {
					t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
				}
				return out
			}
			out := run("skills", "list")
			for _, want := range []string{`suitcase,"packing list","what to pack"`, `"book a table","reserve dinner"`} {
				if !strings.Contains(out, want) {
					t.Errorf("list does not show %s:\n%s", want, out)
				}
			}
			var infos []registry.SkillInfo
			if err := json.Unmarshal([]byte(run("skills", "list", "--json")), &infos); err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(infos, func(s registry.SkillInfo) bool { return s.Name == "pack" })
			if i < 0 || !slices.Equal(infos[i].Triggers, []string{"suitcase"}) || !slices.Equal(infos[i].TriggerPhrases, []string{"packing list", "what to pack"}) {
				t.Errorf("list --json: pack is %+v", infos)
			}
			out = run("skills", "show", "pack")
			if !strings.Contains(out, "triggers:      suitcase\n") || !strings.Contains(out, `text triggers: "packing list", "what to pack"`+"\n") {
				t.Errorf("show:\n%s", out)
			}
			out = run("skills", "show", "pack", "--json")
			if !strings.Contains(out, `"trigger_phrases": [`) {
				t.Errorf("show --json has no trigger_phrases:\n%s", out)
			}
			if out = run("skills", "search", "trip"); !strings.Contains(out, `suitcase,"packing list","what to pack"`) {
				t.Errorf("search:\n%s", out)
			}
		})
	}
}

// An invalid skill shows in list with its state and problems, and keeps serving.
func TestSkillsListInvalid(t *testing.T) {
	t.Parallel()
	url, reg, dir := catalogServer(t, true)
	if err := os.WriteFile(filepath.Join(dir, "hello", "SKILL.md"), []byte("---\nname: hello\ndescription: [broken\n---\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	natstest.Eventually(t, 20*time.Second, func() bool {
		for _, s := range reg.List().Skills {
			if s.Name == "hello" && s.State == registry.StateInvalid {
				return true
			}
		}
		return false
	}, "hello never became invalid")
	out, err := skillbus(t, "skills", "list", "--nats-url", url)
	if err != nil || !regexp.MustCompile(`hello\s+\S+\s+workflow\s+default\s+invalid`).MatchString(out) ||
		!strings.Contains(out, "problems:") || !strings.Contains(out, filepath.Join("hello", "SKILL.md")+":3:") {
		t.Errorf("list:\n%s", out)
	}
}

func TestValidateRemote(t *testing.T) {
	t.Parallel()
	url, _, _ := catalogServer(t, true)
	out, err := skillbus(t, "skills", "validate", "--remote", "--nats-url", url, filepath.Join(fixtures, "good"))
	if err != nil || !strings.Contains(out, "0 errors") {
		t.Errorf("good: %v\n%s", err, out)
	}
	out, err = skillbus(t, "skills", "validate", "--remote", "--json", "--nats-url", url, filepath.Join(fixtures, "bad", "md"))
	var resp registry.ValidateResponse
	if cli.ExitCode(err) != 1 || json.Unmarshal([]byte(out), &resp) != nil || resp.Errors == 0 {
		t.Fatalf("bad: %v\n%s", err, out)
	}
	// Named as the local run names them, below the PATH's parent.
	if !strings.HasPrefix(resp.Diagnostics[0].File, "md/") {
		t.Errorf("diagnostic %s", resp.Diagnostics[0])
	}
	// A skill.yaml sends its whole directory.
	out, err = skillbus(t, "skills", "validate", "--remote", "--json", "--nats-url", url, filepath.Join(fixtures, "good", "triage-issue", "skill.yaml"))
	resp = registry.ValidateResponse{}
	if err != nil || json.Unmarshal([]byte(out), &resp) != nil || resp.Errors != 0 || !slices.Equal(resp.Skills, []string{"triage-issue"}) {
		t.Errorf("a skill.yaml: %v\n%s", err, out)
	}
}

func TestSkillsHelp(t *testing.T) {
	t.Parallel()
	for _, sub := range []string{"list", "show", "search", "validate"} {
		out, err := skillbus(t, "skills", sub, "--help")
		if err != nil || !strings.Contains(out, "Examples:") || !strings.Contains(out, "skillbus skills "+sub) {
			t.Errorf("skills %s --help: %v\n%s", sub, err, out)
		}
	}
}

// exampleSkills counts the example skills (one directory each).
func exampleSkills(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("..", "..", "testdata", "skills"))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.IsDir() {
			n++
		}
	}
	return n
}

// A skills directory mounted from a Kubernetes ConfigMap is links into a hidden
// ..data directory; --remote sends what they point at, as the registry reads it.
func TestValidateRemoteFollowsLinks(t *testing.T) {
	t.Parallel()
	url, _, _ := catalogServer(t, true)
	root := filepath.Join(t.TempDir(), "skills")
	stamp := filepath.Join(root, "..2026_01_01_00_00_00.1", "hello")
	if err := os.MkdirAll(stamp, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"SKILL.md", "skill.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "skills", "hello", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(stamp, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("..2026_01_01_00_00_00.1", filepath.Join(root, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..data", "hello"), filepath.Join(root, "hello")); err != nil {
		t.Fatal(err)
	}
	out, err := skillbus(t, "skills", "validate", "--remote", "--json", "--nats-url", url, root)
	var resp registry.ValidateResponse
	if err != nil || json.Unmarshal([]byte(out), &resp) != nil || !slices.Equal(resp.Skills, []string{"hello"}) || resp.Errors != 0 {
		t.Fatalf("validate --remote of a ConfigMap volume: %v\n%s", err, out)
	}
}

// skills show prints a skill's flow control — when it runs besides its triggers —
// in its text output too, not only in --json.
func TestSkillsShowFlowControl(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"vip-alert/SKILL.md": "---\nname: vip-alert\ndescription: Alerts the account team to a VIP order.\n" +
			"triggers: [com.acme.order.placed]\n" +
			"filter: data.tier == \"vip\"\n" +
			"debounce:\n  key: data.customer\n  period: 2s\n" +
			"concurrency:\n  - key: data.customer\n    limit: 1\n" +
			"cancel_on:\n  - type: com.acme.order.cancelled\n" +
			"---\n\nAlert them.\n",
		"nightly/SKILL.md": "---\nname: nightly\ndescription: Compacts the logs every night.\nschedule: \"0 3 * * *\"\ntimezone: Europe/Berlin\n---\n\nCompact the logs of every service and report how much space was freed.\n",
		"greet/skill.yaml": "name: greet\ndescription: Greets someone.\nversion: 1.0.0\ninputs:\n  - name: name\n    type: string\n    default: world\n    max_length: 100\n    description: who to greet\n  - name: tone\n    enum: [warm, dry]\n    required: true\nsteps:\n  - id: say\n    compute: |\n      result = \"hi \" + inputs.name\n    output: said\noutputs:\n  said: \"{{ said }}\"\n",
	}
	url, _, _ := catalogServerWith(t, true, files)
	out, err := skillbus(t, "skills", "show", "vip-alert", "--nats-url", url)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"filter:        data.tier == \"vip\"\n", "debounce:      2s (at most 20s) by data.customer\n", "concurrency:   1 at once per data.customer\n", "cancel on:     com.acme.order.cancelled"} {
		if !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	// An input's rules, as a sender must meet them.
	out, err = skillbus(t, "skills", "show", "greet", "--nats-url", url)
	for _, want := range []string{"  name string (default \"world\", at most 100 characters): who to greet\n", "  tone string (required, one of [\"warm\",\"dry\"])\n"} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("show greet lacks %q (%v):\n%s", want, err, out)
		}
	}
	// A schedule's next tick, in this machine's zone.
	out, err = skillbus(t, "skills", "show", "nightly", "--nats-url", url)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	m := regexp.MustCompile(`next tick:\s+(\S+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("show of a scheduled skill has no next tick:\n%s", out)
	}
	next, err := time.Parse(time.RFC3339, m[1])
	berlin, _ := time.LoadLocation("Europe/Berlin")
	if err != nil || next.In(berlin).Hour() != 3 || next.Minute() != 0 || !next.After(time.Now()) || next.After(time.Now().Add(25*time.Hour)) {
		t.Errorf("next tick %q (%v), want the next 03:00 in Berlin", m[1], err)
	}
	// skills list says it runs on a schedule, where a skill without triggers
	// showed "-".
	out, err = skillbus(t, "skills", "list", "--nats-url", url)
	if err != nil || !regexp.MustCompile(`(?m)^nightly .*schedule 0 3 \* \* \* \(Europe/Berlin\)\s`).MatchString(out) {
		t.Errorf("skills list of a scheduled skill (%v):\n%s", err, out)
	}
}
