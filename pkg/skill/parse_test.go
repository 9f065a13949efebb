package skill

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// goodFixtures are valid skills of every format: each loads without errors or
// warnings, except where listed.
var goodFixtures = map[string][]diag{
	"good/pdf-report":                     nil,
	"good/triage-issue":                   nil,
	"good/lint-repo":                      nil,
	"good/explicit-only":                  nil,
	"good/single-files/release-notes.md":  nil,
	"good/single-files/rotate_keys.yaml":  nil,
	"good/single-files/crlf-bom.md":       nil,
	"seeds/000/custom/my-custom-skill.md": nil,
	"seeds/001/weather_report":            nil,
	"seeds/001/repo_stats":                nil,
	"seeds/003/deploy-staging":            nil,
	"seeds/004/k8s_pods":                  nil,
	"seeds/004/parallel_cache":            nil,
	"seeds/004/start_work": {
		{"seeds/004/start_work/skill.yaml:4:10", SeverityWarning, `version "1.0" is not a semantic version`},
	},
	"bad/yaml/aliases.yaml": nil,
}

func TestGoodFixtures(t *testing.T) {
	t.Parallel()
	for path, want := range goodFixtures {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			s, ds := LoadPath(fixture(path))
			if diff := cmp.Diff(want, project(ds, fixtures, want), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s\nall:\n%s", diff, ds)
			}
			if s == nil {
				t.Fatal("no skill")
			}
			if s.Name == "" || s.Description == "" || s.Kind == "" || s.Source == "" || len(s.Digest) != 64 {
				t.Errorf("incomplete skill: name %q description %q kind %q source %q digest %q", s.Name, s.Description, s.Kind, s.Source, s.Digest)
			}
			// The JSON form, as published to KV and read back by routers and workers,
			// is the same skill.
			b, err := json.Marshal(s)
			if err != nil {
				t.Fatal(err)
			}
			var back Skill
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(s, &back); diff != "" {
				t.Errorf("JSON round trip (-before +after):\n%s", diff)
			}
		})
	}
}

// TestSeed004StartWork checks seed 004's complete skill, verbatim, field by field.
func TestSeed004StartWork(t *testing.T) {
	t.Parallel()
	s, ds := LoadPath(fixture("seeds/004/start_work"))
	if ds.HasErrors() {
		t.Fatalf("errors:\n%s", ds)
	}
	if s.Kind != KindWorkflow || s.Name != "start_work" || s.Version != "1.0" || s.Author != "AI Workflow" {
		t.Errorf("got kind %s name %s version %s author %s", s.Kind, s.Name, s.Version, s.Author)
	}
	w := s.Workflow
	wantInputs := []Input{
		{Name: "issue_key", Type: "string", Required: true, Description: "Jira issue key (e.g., AAP-12345)", Pattern: `^[A-Z]+-\d+$`},
		{Name: "branch_prefix", Type: "string", Default: "feature", Enum: []any{"feature", "fix", "hotfix", "chore"}},
	}
	if diff := cmp.Diff(wantInputs, w.Inputs); diff != "" {
		t.Errorf("inputs (-want +got):\n%s", diff)
	}
	var ids []string
	for _, st := range w.Steps {
		ids = append(ids, st.ID)
	}
	wantIDs := []string{"get_issue", "build_branch_name", "check_existing_branch", "create_branch", "detect_failure",
		"fix_vpn", "fix_auth", "retry_create_branch", "transition_issue"}
	if diff := cmp.Diff(wantIDs, ids); diff != "" {
		t.Errorf("step ids (-want +got):\n%s", diff)
	}
	wantFirst := Step{ID: "get_issue", Tool: "jira_view_issue", Args: map[string]any{"issue_key": "{{ inputs.issue_key }}"},
		Output: "issue_data", OnError: "fail", Line: 24}
	if diff := cmp.Diff(wantFirst, w.Steps[0]); diff != "" {
		t.Errorf("first step (-want +got):\n%s", diff)
	}
	if st := w.Steps[3]; st.Condition != `not check_existing_branch or '✅' not in str(check_existing_branch)` || st.OnError != "continue" || st.Line != 48 {
		t.Errorf("create_branch = %+v", st)
	}
	wantOutputs := []Output{{Name: "branch", Value: "{{ branch_name }}"}, {Name: "issue", Value: "{{ issue_data }}"}, {Name: "success", Value: true}}
	if diff := cmp.Diff(wantOutputs, w.Outputs); diff != "" {
		t.Errorf("outputs (-want +got):\n%s", diff)
	}
	wantConf := []Confirmation{{Step: "create_branch", Message: "Create branch {{ branch_name }}?", Default: true}}
	if diff := cmp.Diff(wantConf, w.Confirmations); diff != "" {
		t.Errorf("confirmations (-want +got):\n%s", diff)
	}
}

// TestSeed000 checks seed 000's examples: my-custom-skill loads with its fields and
// the defaults, and its researcher subagent parses.
func TestSeed000(t *testing.T) {
	t.Parallel()
	s, ds := LoadOptions{KnownTools: seedTools}.LoadPath(fixture("seeds/000/custom/my-custom-skill.md"))
	if len(ds) > 0 {
		t.Fatalf("diagnostics:\n%s", ds)
	}
	three := 3
	want := &Skill{
		Name: "my-custom-skill", Type: "custom", Description: "My custom skill", Kind: KindInstruction,
		Triggers: []string{"my_custom_trigger"}, RequiredTools: []string{"bash", "git"},
		Priority: DefaultPriority, CostHint: DefaultCostHint, MaxRetries: &three, Timeout: Duration(30 * time.Second),
		Execution: ExecutionPolicy{Sandbox: SandboxProcess, Approval: ApprovalAuto},
		BodyLine:  11,
	}
	if diff := cmp.Diff(want, s, cmpopts.IgnoreFields(Skill{}, "Source", "Digest", "Body")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(s.Body, "# My Custom Skill\n") {
		t.Errorf("body = %q", s.Body)
	}

	data, err := os.ReadFile(fixture("seeds/000/subagents/researcher.md"))
	if err != nil {
		t.Fatal(err)
	}
	a, ds := ParseSubagent("researcher.md", data)
	if ds.HasErrors() {
		t.Fatalf("errors:\n%s", ds)
	}
	if a.Name != "researcher" || a.MaxConcurrent != 1 || time.Duration(a.Timeout) != time.Minute ||
		!cmp.Equal(a.Capabilities, []string{"web_search", "web_scrape", "documentation_lookup"}) {
		t.Errorf("subagent = %+v", a)
	}
}

// TestSeed001 checks seed 001's package: metadata in skill.yaml, instructions in a
// SKILL.md without front matter, a script entrypoint, permissions and policy.
func TestSeed001(t *testing.T) {
	t.Parallel()
	s, ds := LoadPath(fixture("seeds/001/repo_stats"))
	if len(ds) > 0 {
		t.Fatalf("diagnostics:\n%s", ds)
	}
	if s.Kind != KindScript || s.CostHint != "low" || !s.ParallelSafe || s.License != "MIT" {
		t.Errorf("got %+v", s)
	}
	if !strings.HasSuffix(filepath.ToSlash(s.Source), "repo_stats/SKILL.md") || !strings.HasPrefix(s.Body, "# Repository statistics") {
		t.Errorf("source %s body %q", s.Source, s.Body)
	}
	wantPerm := Permissions{
		Network:     NetworkPermissions{Outbound: true},
		Environment: EnvironmentPermissions{Allow: []string{"GITHUB_TOKEN"}},
	}
	if diff := cmp.Diff(wantPerm, s.Permissions); diff != "" {
		t.Errorf("permissions (-want +got):\n%s", diff)
	}
	if s.Execution != (ExecutionPolicy{Sandbox: "process", Approval: "ask"}) || time.Duration(s.Timeout) != 2*time.Minute {
		t.Errorf("execution %+v timeout %s", s.Execution, s.Timeout)
	}
	wantPre := []Prerequisite{{Kind: PrerequisiteCommand, Name: "git"}, {Kind: PrerequisiteEnv, Name: "GITHUB_TOKEN"}}
	if diff := cmp.Diff(wantPre, s.Prerequisites); diff != "" {
		t.Errorf("prerequisites (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]Entrypoint{{Name: "default", Command: []string{"scripts/stats.rb"}}}, s.Entrypoints); diff != "" {
		t.Errorf("entrypoints (-want +got):\n%s", diff)
	}
	if len(s.Resources) != 1 || s.Resources[0].Kind != ResourceScript || s.Resources[0].Path != "scripts/stats.rb" {
		t.Errorf("resources = %+v", s.Resources)
	}
}

func TestResources(t *testing.T) {
	t.Parallel()
	s, ds := LoadPath(fixture("good/pdf-report"))
	if len(ds) > 0 {
		t.Fatalf("diagnostics:\n%s", ds)
	}
	want := []Resource{
		{Path: "assets/logo.png", Kind: ResourceAsset, Size: 24, Binary: true},
		{Path: "references/style.md", Kind: ResourceReference, Size: 61, Inline: true},
		{Path: "scripts/render.py", Kind: ResourceScript, Size: 63, Inline: true},
	}
	if diff := cmp.Diff(want, s.Resources, cmpopts.IgnoreFields(Resource{}, "SHA256")); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if !cmp.Equal(s.AllowedTools, []string{"Bash(python3:*)", "Read", "Write"}) {
		t.Errorf("allowed tools = %q", s.AllowedTools)
	}
	if s.Metadata["owner"] != "data-team" || s.Compatibility == "" || s.License != "Apache-2.0" {
		t.Errorf("agent skills fields: %+v", s)
	}
}

// TestDigest checks that the digest depends on contents and names only, and that
// parsing a file directly agrees with loading it.
func TestDigest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(rel, text string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	md := "---\nname: d\ndescription: digest test\n---\nA body that is long enough to avoid the short-content warning.\n"
	write("d/SKILL.md", md)
	write("d/references/a.md", "a")
	load := func() string {
		t.Helper()
		s, ds := LoadPath(filepath.Join(dir, "d"))
		if s == nil {
			t.Fatalf("errors:\n%s", ds)
		}
		return s.Digest
	}
	d1 := load()
	if d1 != load() {
		t.Error("digest changes between loads")
	}
	write("d/references/a.md", "b")
	d2 := load()
	if d2 == d1 {
		t.Error("digest ignores a resource's content")
	}
	if err := os.Rename(filepath.Join(dir, "d/references/a.md"), filepath.Join(dir, "d/references/c.md")); err != nil {
		t.Fatal(err)
	}
	if load() == d2 {
		t.Error("digest ignores a resource's name")
	}
	// Moving the skill does not change it.
	if err := os.Rename(filepath.Join(dir, "d"), filepath.Join(dir, "moved")); err != nil {
		t.Fatal(err)
	}
	write("moved/SKILL.md", md) // unchanged content
	s, _ := LoadPath(filepath.Join(dir, "moved"))
	if s == nil {
		t.Fatal("no skill")
	}
	single := filepath.Join(dir, "single.md")
	write("single.md", strings.Replace(md, "name: d", "name: single", 1))
	a, _ := LoadPath(single)
	data, _ := os.ReadFile(single)
	b, _ := ParseSkillMD(single, data)
	if a == nil || b == nil || a.Digest != b.Digest {
		t.Errorf("LoadPath and ParseSkillMD digests differ")
	}
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	s, ds := ParseSkillMD("x/SKILL.md", []byte("---\nname: x\ndescription: d\n---\n"+strings.Repeat("words ", 20)))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	if s.Retries() != 3 || s.ExecTimeout() != 30*time.Second || s.Priority != "medium" || s.CostHint != "medium" ||
		s.Cacheable || s.Version != "" || s.Author != "" || s.PoolName() != DefaultPool ||
		s.Execution.Sandbox != "process" || s.Execution.Approval != "auto" || s.Kind != KindInstruction {
		t.Errorf("defaults: %+v", s)
	}
	s, _ = ParseSkillMD("x/SKILL.md", []byte("---\nname: x\ndescription: d\nmax_concurrent: 2\n---\n"+strings.Repeat("words ", 20)))
	if s.PoolName() != "solo-x" {
		t.Errorf("pool = %s", s.PoolName())
	}
}

// TestWorkflowAlone parses a skill.yaml that carries its own metadata.
func TestWorkflowAlone(t *testing.T) {
	t.Parallel()
	src := `name: hello
description: says hello
triggers: [io.skillbus.hello]
inputs:
  - name: who
steps:
  - id: greet
    tool: say
    args: {text: "hello {{ inputs.who }}", count: 2, ratio: 0.5, items: [1, "two"]}
    parallel_group: 3
`
	s, ds := ParseWorkflow("hello.yaml", []byte(src))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	st := s.Workflow.Steps[0]
	want := map[string]any{"text": "hello {{ inputs.who }}", "count": 2, "ratio": 0.5, "items": []any{1, "two"}}
	if diff := cmp.Diff(want, st.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	if st.ParallelGroup != "3" || st.Line != 7 || s.Workflow.Source != "hello.yaml" || s.Source != "hello.yaml" {
		t.Errorf("step %+v", st)
	}
	if p, n := st.ErrorPolicy(); p != "fail" || n != 0 {
		t.Errorf("policy %s %d", p, n)
	}
	if p, n := (Step{OnError: "retry:4"}).ErrorPolicy(); p != "retry" || n != 4 {
		t.Errorf("policy %s %d", p, n)
	}
}

// TestJSONRoundTrip checks that a skill with every kind of free-form value survives
// the catalog's JSON: what a router or worker reads back equals what the registry
// parsed, integers included.
func TestJSONRoundTrip(t *testing.T) {
	t.Parallel()
	s, ds := ParseWorkflow("rt.yaml", []byte(`name: rt
description: round trip
metadata: {count: 3, ratio: 0.25, big: 9007199254740993, nested: {list: [1, "a", true, null]}}
inputs:
  - name: n
    type: integer
    default: 2
    enum: [1, 2, 3]
  - name: opts
    type: object
    default: {retries: 4, tags: [x]}
steps:
  - id: a
    tool: t
    args: {n: 5, f: 1.5, s: "{{ inputs.n }}", deep: {list: [{k: 1}]}}
    timeout: 1.5
    cache: 2m
outputs:
  count: 7
  text: "{{ a }}"
`))
	if ds.HasErrors() {
		t.Fatal(ds)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Skill
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(s, &back); diff != "" {
		t.Errorf("(-before +after):\n%s", diff)
	}
	if v, ok := back.Workflow.Steps[0].Args["n"].(int); !ok || v != 5 {
		t.Errorf("args.n = %#v, want int 5", back.Workflow.Steps[0].Args["n"])
	}
	data, _ := os.ReadFile(fixture("seeds/000/subagents/researcher.md"))
	a, _ := ParseSubagent("researcher.md", data)
	b, _ = json.Marshal(a)
	var aback Subagent
	if err := json.Unmarshal(b, &aback); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(a, &aback); diff != "" {
		t.Errorf("subagent (-before +after):\n%s", diff)
	}
}

// TestInputReadsByKey checks that the names templates read are found by the
// parser that runs them: inputs.items reads the input named items (a key wins
// over the dict method of the same name), inputs.items() is the method, and a
// read of an undeclared input is reported where its key is.
func TestInputReadsByKey(t *testing.T) {
	t.Parallel()
	src := `name: lists
description: lists things
inputs:
  - name: items
    type: array
steps:
  - id: show
    tool: say
    args:
      all: "{{ inputs.items | join(', ') }}"
      pairs: "{{ inputs.items() | length }}"
      bad: "{{ inputs.keys }} {{ inputs['valeus'] }}"
`
	_, ds := ParseWorkflow("lists.yaml", []byte(src))
	want := []diag{
		{"lists.yaml:12:23", SeverityError, "unknown input keys"},
		{"lists.yaml:12:42", SeverityError, "unknown input valeus"},
	}
	if diff := cmp.Diff(want, project(ds, ".", want)); diff != "" {
		t.Errorf("diagnostics (-want +got):\n%s", diff)
	}
}

// A skill that declares "*" takes every field, so a template may read any input:
// none is reported unknown.
func TestInputReadsUnderAnyInput(t *testing.T) {
	t.Parallel()
	src := `name: hook
description: takes a webhook's fields
inputs:
  - name: "*"
steps:
  - id: show
    tool: say
    args:
      order: "{{ inputs.order }} {{ inputs['customer'] }}"
`
	if _, ds := ParseWorkflow("hook.yaml", []byte(src)); len(ds) != 0 {
		t.Errorf("diagnostics:\n%s", ds)
	}
}

// Skill systems that route on words write triggers as phrases: those load, split
// from the CloudEvent types, and nothing is refused.
func TestTriggerPhrases(t *testing.T) {
	t.Parallel()
	s, ds := ParseSkillMD("code-review/SKILL.md", []byte("---\nname: code-review\ndescription: Review a change.\n"+
		"triggers: [\"code review\", review, com.github.pull_request.opened, \"review my PR!\", \"code review\"]\n"+
		"anti_triggers: [\"security audit\"]\n---\nReview the diff for bugs, risky changes and unclear names; say what to fix and why.\n"))
	if ds.HasErrors() || len(ds) > 0 {
		t.Fatalf("diagnostics:\n%s", ds)
	}
	if diff := cmp.Diff([]string{"review", "com.github.pull_request.opened"}, s.Triggers); diff != "" {
		t.Errorf("types (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"code review", "review my PR!"}, s.TriggerPhrases); diff != "" {
		t.Errorf("phrases (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"security audit"}, s.AntiTriggers); diff != "" {
		t.Errorf("anti_triggers (-want +got):\n%s", diff)
	}
}

// A SKILL.md beside a skill.yaml may be instructions alone, without front matter:
// a body that starts with words and a colon, and holds a rule ---, is not taken for
// front matter that lost its opening line.
func TestBodyWithoutFrontMatter(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "notes")
	write := func(name, data string) {
		t.Helper()
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("skill.yaml", "name: notes\ndescription: Files notes.\nsteps:\n  - id: one\n    tool: noop\n")
	for _, body := range []string{
		"Usage: call it with the notes to file.\n\n---\n\nNothing else.\n",
		"names: are not a field\n---\n",
		"description:is not a field without a space\n---\n",
	} {
		write("SKILL.md", body)
		s, ds := LoadPath(dir)
		if ds.HasErrors() || s.Body != body {
			t.Errorf("body %q: diagnostics %v", body, ds)
		}
	}
}
