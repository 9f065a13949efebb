package skill

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// seedTools is seed 000's validTools list.
var seedTools = []string{"bash", "git", "github", "read", "write", "edit", "search", "research", "plan", "run_tests"}

// TestGolden loads each bad fixture and compares its diagnostics, in order, with
// the expected ones: position, severity and a substring of the message.
func TestGolden(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		opts LoadOptions
		want []diag
	}{
		// Seed 000's error-analyzer front matter, exactly as printed: two fields are
		// misindented. Both are reported, each at its line, with the fix.
		{path: "seeds/000/self-improvement/error-analyzer.md", want: []diag{
			{"seeds/000/self-improvement/error-analyzer.md:16:3", SeverityError, "invalid YAML in front matter: did not find expected '-' indicator"},
			{"seeds/000/self-improvement/error-analyzer.md:20:3", SeverityError, "max_retries is indented, so YAML reads it as part of cacheable's value"},
		}},
		{path: "seeds/004/start_work", want: []diag{
			{"seeds/004/start_work/skill.yaml:4:10", SeverityWarning, `version "1.0" is not a semantic version`},
		}},

		// Front matter.
		{path: "bad/md/no-front-matter.md", want: []diag{
			{"bad/md/no-front-matter.md:1:1", SeverityError, "no-front-matter.md has no front matter"},
		}},
		{path: "bad/md/late-front-matter.md", want: []diag{
			{"bad/md/late-front-matter.md:1:1", SeverityError, "has no front matter"},
		}},
		{path: "bad/md/no-opening-line.md", want: []diag{
			{"bad/md/no-opening-line.md:2:1", SeverityError, "front matter must start with a line ---; no-opening-line.md has fields from line 2 (name:) to the --- on line 4, with no --- above them"},
		}},
		{path: "bad/md/unclosed-front-matter.md", want: []diag{
			{"bad/md/unclosed-front-matter.md:1:1", SeverityError, "front matter is not closed"},
		}},
		{path: "bad/md/not-a-mapping.md", want: []diag{
			{"bad/md/not-a-mapping.md:2:1", SeverityError, "front matter must be a mapping of fields, not a list"},
		}},
		{path: "bad/md/tabs.md", want: []diag{
			{"bad/md/tabs.md:5:2", SeverityError, "invalid YAML in front matter: found character that cannot start any token"},
		}},
		{path: "bad/md/duplicate-key.md", want: []diag{
			{"bad/md/duplicate-key.md:4:1", SeverityError, "duplicate key description (first at line 3)"},
		}},

		// Required fields, names.
		{path: "bad/md/missing-fields.md", want: []diag{
			{"bad/md/missing-fields.md:1:1", SeverityError, "name is required"},
			{"bad/md/missing-fields.md:1:1", SeverityError, "description is required"},
		}},
		{path: "bad/md/bad-name.md", want: []diag{
			{"bad/md/bad-name.md:2:7", SeverityError, `name "Weather Report!" has uppercase letters`},
		}},
		{path: "bad/md/name-separators.md", want: []diag{
			{"bad/md/name-separators.md:2:7", SeverityError, `name "fix--build_" has two separators in a row`},
		}},

		// Seed 000's validator rules.
		{path: "bad/md/semver-timeout.md", want: []diag{
			{"bad/md/semver-timeout.md:4:10", SeverityWarning, `version "v2" is not a semantic version`},
			{"bad/md/semver-timeout.md:5:13", SeverityWarning, "timeout 500ms is outside 1s–5m"},
		}},
		{path: "bad/md/short-body.md", want: []diag{
			{"bad/md/short-body.md:5", SeverityWarning, "instructions are 6 characters"},
		}},
		{path: "bad/md/fences.md", want: []diag{
			{"bad/md/fences.md:15:1", SeverityError, "code block opened here is not closed"},
		}},
		{path: "bad/md/unknown-tools.md", opts: LoadOptions{KnownTools: seedTools}, want: []diag{
			{"bad/md/unknown-tools.md:5:5", SeverityError, "tool bash is also in disallowed_tools"},
			{"bad/md/unknown-tools.md:6:5", SeverityError, "unknown tool gti"},
			{"bad/md/unknown-tools.md:7:16", SeverityError, "unknown tool Read"},
			{"bad/md/unknown-tools.md:7:16", SeverityError, "unknown tool Grepp"},
			{"bad/md/unknown-tools.md:8:28", SeverityWarning, "unknown tool telnet"},
		}},
		{path: "bad/md/unknown-keys.md", want: []diag{
			{"bad/md/unknown-keys.md:4:1", SeverityWarning, "unknown field trigers in front matter"},
			{"bad/md/unknown-keys.md:6:1", SeverityWarning, "unknown field anti-triggers"},
			{"bad/md/unknown-keys.md:7:1", SeverityWarning, "unknown field colour"},
			// A misspelt control says the skill runs without it.
			{"bad/md/unknown-keys.md:8:1", SeverityWarning, "unknown field debounse in front matter; it is ignored"},
		}},
		{path: "bad/md/wrong-types.md", want: []diag{
			{"bad/md/wrong-types.md:4:14", SeverityError, `max_retries must be an integer, not the string "three"`},
			{"bad/md/wrong-types.md:5:12", SeverityError, `cacheable must be true or false, not the string "yes"`},
			{"bad/md/wrong-types.md:6:10", SeverityError, `timeout must be a duration, not the string "soon"`},
			{"bad/md/wrong-types.md:7:7", SeverityError, `tags must be a list, not the string "urgent"`},
			{"bad/md/wrong-types.md:8:11", SeverityError, `priority "urgent" is not valid`},
			{"bad/md/wrong-types.md:9:7", SeverityError, `cost "5" is not valid`},
			{"bad/md/wrong-types.md:10:17", SeverityError, "max_concurrent must be at least 1"},
			{"bad/md/wrong-types.md:11:16", SeverityError, "parallel_safe must be true or false, not the integer 1"},
			{"bad/md/wrong-types.md:14:5", SeverityError, "triggers[1] must be a string, not a list"},
		}},
		{path: "bad/md/triggers.md", want: []diag{
			{"bad/md/triggers.md:7:5", SeverityWarning, `trigger "io..skillbus" is not a CloudEvent type (it has an empty token`},
			{"bad/md/triggers.md:8:5", SeverityError, `trigger "skill.other" is reserved`},
			{"bad/md/triggers.md:9:5", SeverityWarning, `triggers lists "com.github.push" twice`},
		}},
		// The most common mistake of public SKILL.md files loads, with the fix; any
		// other YAML error in the same document still fails.
		{path: "bad/md/colon-description.md", want: []diag{
			{"bad/md/colon-description.md:3:14", SeverityWarning, `description holds ': ', which strict YAML rejects (other tools may drop this skill); it is read as the text "Review code: bugs, style and naming"`},
			{"bad/md/colon-description.md:4:1", SeverityWarning, "unknown field when_to_use"},
			{"bad/md/colon-description.md:4:14", SeverityWarning, `when_to_use holds ': '`},
		}},
		{path: "bad/md/colon-and-tab.md", want: []diag{
			{"bad/md/colon-and-tab.md:3:14", SeverityWarning, `description holds ': '`},
			{"bad/md/colon-and-tab.md:5:2", SeverityError, "invalid YAML in front matter: found character that cannot start any token"},
		}},
		{path: "bad/md/alias-conflict.md", want: []diag{
			{"bad/md/alias-conflict.md:5:1", SeverityError, "cost and cost_hint are the same field"},
			{"bad/md/alias-conflict.md:7:1", SeverityError, "timeout_ms (20s) contradicts the timeout set before (10s)"},
		}},
		{path: "bad/md/policies.md", want: []diag{
			{"bad/md/policies.md:5:3", SeverityError, "permissions.filesystem is not supported yet"},
			{"bad/md/policies.md:6:11", SeverityError, "permissions.filesystem.read must be a list"},
			{"bad/md/policies.md:7:12", SeverityError, `permissions.network must be a mapping, not the string "yes"`},
			{"bad/md/policies.md:8:3", SeverityWarning, "unknown field permissions.enviroment"},
			{"bad/md/policies.md:11:12", SeverityError, `execution.sandbox "docker" is not valid`},
			{"bad/md/policies.md:12:13", SeverityError, `execution.approval "never" is not valid`},
			{"bad/md/policies.md:15:5", SeverityError, "prerequisites[0] names both env and command"},
			{"bad/md/policies.md:16:5", SeverityWarning, "unknown field prerequisites[1].nothing"},
			{"bad/md/policies.md:16:5", SeverityError, "prerequisites[1] says nothing to check"},
			{"bad/md/policies.md:17:7", SeverityError, `pool "gpu.large" is not a NATS subject token`},
			{"bad/md/policies.md:19:13", SeverityError, "examples.positive must be a list"},
			{"bad/md/policies.md:20:3", SeverityWarning, "unknown field examples.neutral"},
		}},
		// What skillbus cannot enforce yet is rejected, not ignored.
		{path: "bad/md/unsupported.md", want: []diag{
			{"bad/md/unsupported.md:5:3", SeverityError, "permissions.filesystem is not supported yet: skillbus cannot confine a process to paths; " +
				"a process may read and write what its user may: under a worker running as root, a user of the call's own (nobody for exec steps of a worker with --exec-dir), " +
				"with no more rights than any user beyond its working directory; under a worker of another user, that user"},
			{"bad/md/unsupported.md:8:19", SeverityError, "permissions.environment.allow names SKILLBUS_NATS_PASSWORD: variables starting with SKILLBUS_ configure skillbus itself"},
			{"bad/md/unsupported.md:10:12", SeverityError, "execution.sandbox container is not supported yet"},
		}},
		{path: "bad/md/no-sandbox.md", want: []diag{
			{"bad/md/no-sandbox.md:5:12", SeverityError, "execution.sandbox none is not supported: every exec step and entrypoint runs in the process sandbox"},
		}},
		{path: "bad/md/workflow-in-md.md", want: []diag{
			{"bad/md/workflow-in-md.md:4:1", SeverityError, "steps belongs in skill.yaml, not in front matter"},
		}},
		{path: "bad/md/entrypoint-outside.md", want: []diag{
			{"bad/md/entrypoint-outside.md:6:14", SeverityError, "entrypoint default runs /usr/bin/env, outside the skill directory"},
			{"bad/md/entrypoint-outside.md:8:14", SeverityError, "entrypoint escape runs ../../bin/evil.sh, outside the skill directory"},
			{"bad/md/entrypoint-outside.md:10:14", SeverityError, "a single-file skill has no directory to hold it"},
		}},

		// skill.yaml.
		{path: "bad/yaml/inputs.yaml", want: []diag{
			{"bad/yaml/inputs.yaml:5:11", SeverityError, `input issue_key has unknown type "str"`},
			{"bad/yaml/inputs.yaml:6:14", SeverityError, "input issue_key: pattern does not compile"},
			{"bad/yaml/inputs.yaml:9:14", SeverityError, "default feature of input branch_prefix is not one of its enum values"},
			{"bad/yaml/inputs.yaml:13:14", SeverityError, `default of input count is the string "3", but the input is an integer`},
			{"bad/yaml/inputs.yaml:16:14", SeverityError, `default of input ratio is the string "high", but the input is a number`},
			{"bad/yaml/inputs.yaml:19:14", SeverityError, "default of input flags is a mapping, but the input is an array"},
			{"bad/yaml/inputs.yaml:22:17", SeverityError, "max_length must not be negative"},
			{"bad/yaml/inputs.yaml:26:14", SeverityError, `default "ABC" of input code does not match its pattern`},
			{"bad/yaml/inputs.yaml:27:17", SeverityError, `enum value "ABC" of input code does not match its pattern`},
			{"bad/yaml/inputs.yaml:28:11", SeverityError, "input issue_key is defined twice (first at line 4)"},
			{"bad/yaml/inputs.yaml:30:11", SeverityError, `input name "bad-name" is not an identifier`},
			{"bad/yaml/inputs.yaml:31:5", SeverityError, "inputs[9] has no name"},
			{"bad/yaml/inputs.yaml:34:15", SeverityError, `enum value of input level is the string "two", but the input is an integer`},
			{"bad/yaml/inputs.yaml:36:14", SeverityWarning, "input level is required, so its default is never used"},
			{"bad/yaml/inputs.yaml:37:5", SeverityWarning, "unknown field inputs[10].unit"},
		}},
		{path: "bad/yaml/steps.yaml", want: []diag{
			{"bad/yaml/steps.yaml:7:9", SeverityError, "step id fetch is used twice (first at line 4)"},
			{"bad/yaml/steps.yaml:9:9", SeverityError, `step id "2nd-step" is not an identifier`},
			{"bad/yaml/steps.yaml:13:14", SeverityError, "step both has both tool and compute"},
			{"bad/yaml/steps.yaml:14:5", SeverityError, "step neither has neither tool nor compute"},
			{"bad/yaml/steps.yaml:18:11", SeverityError, "step looping loops but has no loop_var"},
			{"bad/yaml/steps.yaml:21:15", SeverityError, "step loop_var_only has loop_var but no loop"},
			{"bad/yaml/steps.yaml:24:15", SeverityError, `on_error "contine" is not a policy; did you mean continue?`},
			{"bad/yaml/steps.yaml:27:15", SeverityError, `on_error "retry:11" retries must be a number from 1 to 10`},
			{"bad/yaml/steps.yaml:30:18", SeverityError, "step deps depends on unknown step fecth; did you mean fetch?"},
			{"bad/yaml/steps.yaml:30:25", SeverityError, "step deps depends on itself"},
			{"bad/yaml/steps.yaml:30:31", SeverityError, "step deps depends on later, which comes later (line 31)"},
			{"bad/yaml/steps.yaml:35:12", SeverityError, "cache takes how long to keep the result, not the boolean true"},
			{"bad/yaml/steps.yaml:36:14", SeverityError, "step timeout must be positive"},
			{"bad/yaml/steps.yaml:37:9", SeverityError, "step id inputs is reserved"},
			{"bad/yaml/steps.yaml:46:21", SeverityWarning, "parallel group g is split"},
			{"bad/yaml/steps.yaml:47:18", SeverityError, "step same_group_b depends on same_group_a, but both are in parallel group g"},
			{"bad/yaml/steps.yaml:50:13", SeverityError, "output name fetch is also the id of step fetch (line 4)"},
			{"bad/yaml/steps.yaml:53:5", SeverityWarning, "unknown field steps[17].agrs; it is ignored"},
			{"bad/yaml/steps.yaml:56:14", SeverityWarning, "step slow may run 10m0s, longer than the skill's timeout 30s"},
		}},
		{path: "bad/yaml/sleeps.yaml", want: []diag{
			{"bad/yaml/sleeps.yaml:7:12", SeverityError, `steps[0].sleep must be a duration, not the string "a day"`},
			{"bad/yaml/sleeps.yaml:9:19", SeverityError, "invalid template: unclosed {{"},
			{"bad/yaml/sleeps.yaml:11:18", SeverityError, `sleep_until "tomorrow" is not an RFC 3339 time`},
			{"bad/yaml/sleeps.yaml:12:5", SeverityError, "step both has tool and sleep; a step does one of them"},
			{"bad/yaml/sleeps.yaml:16:12", SeverityError, "sleep must be positive"},
			{"bad/yaml/sleeps.yaml:17:5", SeverityError, "step looped sleeps; loop, args, timeout and cache do not apply"},
			{"bad/yaml/sleeps.yaml:22:29", SeverityError, "unknown input dew"},
		}},
		{path: "bad/yaml/templates.yaml", want: []diag{
			{"bad/yaml/templates.yaml:10:29", SeverityError, "unknown input issue_kye; did you mean issue_key?"},
			{"bad/yaml/templates.yaml:15:19", SeverityError, "unknown step or name get_isue; did you mean get_issue?"},
			{"bad/yaml/templates.yaml:16:17", SeverityError, "unknown step or name summary"},
			{"bad/yaml/templates.yaml:17:16", SeverityError, "unknown step or name issue_key; did you mean inputs.issue_key?"},
			{"bad/yaml/templates.yaml:19:17", SeverityError, "step later_step (line 21) runs later"},
			{"bad/yaml/templates.yaml:24:16", SeverityError, "invalid template: unclosed {{"},
			{"bad/yaml/templates.yaml:28:13", SeverityError, "invalid compute block: syntax error"},
			{"bad/yaml/templates.yaml:31:16", SeverityError, "unknown step or name undefined_name"},
			{"bad/yaml/templates.yaml:33:15", SeverityError, "unknown step or name branch_nme"},
			{"bad/yaml/templates.yaml:36:24", SeverityError, "issue_data comes from step get_issue (line 7), which has not run when this confirmation is asked"},
		}},
		{path: "bad/yaml/scopes.yaml", want: []diag{
			{"bad/yaml/scopes.yaml:11:18", SeverityError, "own_result is the result of this step, which is not available yet"},
			{"bad/yaml/scopes.yaml:23:17", SeverityError, "unknown step or name item"},
			{"bad/yaml/scopes.yaml:27:26", SeverityError, "unknown input branch_prefx; did you mean branch_prefix?"},
			{"bad/yaml/scopes.yaml:30:29", SeverityError, "unknown input issue_kee; did you mean issue_key?"},
			{"bad/yaml/scopes.yaml:35:32", SeverityError, "invalid condition: syntax error"},
			{"bad/yaml/scopes.yaml:38:11", SeverityError, `loop is the text "items", not a template giving a list`},
			{"bad/yaml/scopes.yaml:43:13", SeverityError, "unknown step or name item"},
		}},
		{path: "bad/yaml/confirmations.yaml", want: []diag{
			{"bad/yaml/confirmations.yaml:7:11", SeverityError, "confirmation names unknown step delete_brnch; did you mean delete_branch?"},
			{"bad/yaml/confirmations.yaml:9:5", SeverityError, "confirmation of delete_branch has no message"},
			{"bad/yaml/confirmations.yaml:10:5", SeverityError, "confirmations[2] names no step"},
			{"bad/yaml/confirmations.yaml:13:11", SeverityError, "step delete_branch is confirmed twice"},
			{"bad/yaml/confirmations.yaml:15:14", SeverityError, "confirmations[4].timeout must not be negative"},
		}},
		{path: "bad/yaml/outputs-list.yaml", want: []diag{
			{"bad/yaml/outputs-list.yaml:7:3", SeverityError, "outputs must be a mapping, not a list"},
		}},
		{path: "bad/yaml/no-steps.yaml", want: []diag{
			{"bad/yaml/no-steps.yaml:1:1", SeverityError, "the workflow has no steps"},
		}},
		{path: "bad/yaml/empty-steps.yaml", want: []diag{
			{"bad/yaml/empty-steps.yaml:3:1", SeverityError, "steps is empty"},
		}},
		{path: "bad/yaml/multi-doc.yaml", want: []diag{
			{"bad/yaml/multi-doc.yaml:6", SeverityError, "multi-doc.yaml holds more than one YAML document"},
		}},
		{path: "bad/yaml/malformed.yaml", want: []diag{
			{"bad/yaml/malformed.yaml:3:1", SeverityError, "invalid YAML in malformed.yaml: did not find expected ',' or ']'"},
		}},
		{path: "bad/yaml/laughs.yaml", want: []diag{
			{"bad/yaml/laughs.yaml:10:3", SeverityError, "YAML aliases expand to more than 100000 nodes"},
		}},
		{path: "bad/yaml/aliases.yaml", want: nil},

		// Skill directories.
		{path: "bad/dirs/both-yaml", want: []diag{
			{"bad/dirs/both-yaml", SeverityError, "skill.yaml and skill.yml are both present"},
		}},
		{path: "bad/dirs/conflict", want: []diag{
			{"bad/dirs/conflict/skill.yaml:2:1", SeverityError, "description here differs from description at"},
		}},
		// Without its opening ---, the front matter would be the instructions of the
		// workflow beside it, and name and description missing.
		{path: "bad/dirs/no-opening-line", want: []diag{
			{"bad/dirs/no-opening-line/SKILL.md:1:1", SeverityError, "front matter must start with a line ---; SKILL.md has fields from line 1 (name:) to the --- on line 3"},
		}},
		{path: "bad/dirs/entrypoint-missing", want: []diag{
			{"bad/dirs/entrypoint-missing/SKILL.md:6:14", SeverityError, "entrypoint default runs scripts/nope.sh, which is not a file of the skill"},
		}},
		{path: "bad/dirs/metadata-only", want: []diag{
			{"bad/dirs/metadata-only/skill.yaml:1:1", SeverityError, "the skill has nothing to run"},
		}},
		{path: "bad/dirs/name-mismatch", want: []diag{
			{"bad/dirs/name-mismatch/SKILL.md:2:7", SeverityWarning, "name other-name differs from its directory name name-mismatch"},
		}},
		{path: "bad/dirs/broken-links", want: []diag{
			{"bad/dirs/broken-links/SKILL.md:7:61", SeverityWarning, "link to references/missing.md names no file of the skill"},
			{"bad/dirs/broken-links/SKILL.md:9:20", SeverityWarning, "link to ../../secrets.txt leaves the skill directory"},
		}},
		{path: "bad/dirs/not-a-skill", want: []diag{
			{"bad/dirs/not-a-skill", SeverityError, "not a skill directory"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			s, ds := tt.opts.LoadPath(fixture(tt.path))
			checkFiles(t, ds)
			if diff := cmp.Diff(tt.want, project(ds, fixtures, tt.want), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("diagnostics (-want +got):\n%s\nall:\n%s", diff, ds)
			}
			if (s == nil) != ds.HasErrors() {
				t.Errorf("skill = %v with errors = %v; want a skill exactly when there are no errors", s != nil, ds.HasErrors())
			}
		})
	}
}

// A misspelt control field says, in its hint, that the skill runs without the
// control; a misspelling of another field, or of a control also set correctly, does not.
func TestMisspeltControlSaysItIsOff(t *testing.T) {
	t.Parallel()
	_, ds := LoadOptions{}.LoadPath(fixture("bad/md/unknown-keys.md"))
	hints := map[string]string{}
	for _, d := range ds {
		hints[strings.Fields(d.Message)[2]] = d.Hint
	}
	if h := hints["debounse"]; h != "did you mean debounce? As written, the skill has no debounce" {
		t.Errorf("debounse: hint %q", h)
	}
	if h := hints["trigers"]; h != "did you mean triggers? As written, the skill has no triggers" {
		t.Errorf("trigers: hint %q", h)
	}
	if h := hints["colour"]; h != "" {
		t.Errorf("colour: hint %q", h)
	}
}

// A misspelt field of the workflow, an input or a step whose absence changes what
// the skill does says what it does as written; one whose field is also set, or
// whose absence changes nothing, says only which field was meant.
func TestMisspeltFieldSaysWhatItChanges(t *testing.T) {
	t.Parallel()
	const head = "name: x\ndescription: Does x.\n"
	const step = "steps:\n  - id: a\n    tool: echo\n    args: {m: hi}\n"
	for _, tt := range []struct {
		name, src, want string
	}{
		{"required", head + "inputs:\n  - name: customer\n    requird: true\n" + step,
			"5:5: warning: unknown field inputs[0].requird; it is ignored (hint: did you mean required? As written, the input is optional)"},
		{"required also set", head + "inputs:\n  - name: customer\n    required: true\n    requird: true\n" + step,
			"6:5: warning: unknown field inputs[0].requird; it is ignored (hint: did you mean required?)"},
		{"type", head + "inputs:\n  - name: n\n    tpye: integer\n" + step,
			"5:5: warning: unknown field inputs[0].tpye; it is ignored (hint: did you mean type? As written, the input is a string)"},
		{"enum", head + "inputs:\n  - name: c\n    enun: [EUR, USD]\n" + step,
			"5:5: warning: unknown field inputs[0].enun; it is ignored (hint: did you mean enum? As written, the input takes any value of its type)"},
		{"description", head + "inputs:\n  - name: c\n    descripton: the currency\n" + step,
			"5:5: warning: unknown field inputs[0].descripton; it is ignored (hint: did you mean description?)"},
		{"condition", head + step + "    condtion: \"inputs.go\"\n",
			"7:5: warning: unknown field steps[0].condtion; it is ignored (hint: did you mean condition? As written, the step always runs)"},
		{"on_error", head + step + "    on_eror: continue\n",
			"7:5: warning: unknown field steps[0].on_eror; it is ignored (hint: did you mean on_error? As written, a failure of the step fails the run)"},
		{"args", head + "steps:\n  - id: a\n    tool: echo\n    agrs: {m: hi}\n",
			"6:5: warning: unknown field steps[0].agrs; it is ignored (hint: did you mean args?)"},
		{"outputs", head + step + "output:\n  total: \"{{ a }}\"\n",
			"7:1: warning: unknown field output in skill.yaml; it is ignored (hint: did you mean outputs? As written, the run returns every step's result by name)"},
		{"a built-in tool's unknown argument", head + "steps:\n  - id: a\n    tool: http\n    args:\n      url: https://example.com\n      metod: POST\n",
			"8:7: error: the http tool takes no argument \"metod\": every run of step a would fail (hint: did you mean method? it takes url, method, headers, query, json, body, timeout)"},
		{"a merge key in a built-in tool's arguments", head + "base: &base\n  method: POST\n" + "steps:\n  - id: a\n    tool: http\n    args:\n      <<: *base\n      url: https://example.com\n",
			"3:1: warning: unknown field base in skill.yaml; it is ignored"}, // and no error for <<
		{"confirmations in a step", head + step + "    confirmations:\n      - step: a\n        message: Go?\n",
			"7:5: error: steps[0].confirmations is not a step field: confirmations are declared at the top level of the workflow, naming their step; as written, this step would run without anyone confirming it (hint: move it to the workflow's top level: confirmations: [{step: <this step's id>, message: ...}])"},
		{"on_error retry N", head + step + "    on_error: retry 2\n",
			"7:15: error: on_error \"retry 2\" is not a policy; did you mean retry:2? (hint: write retry:N, with a colon and no spaces)"},
		{"confirmations", head + step + "confirmation:\n  - step: a\n    message: Go?\n",
			"7:1: warning: unknown field confirmation in skill.yaml; it is ignored (hint: did you mean confirmations? As written, the workflow has no confirmations)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ds := ParseWorkflow("skill.yaml", []byte(tt.src))
			if len(ds) != 1 || strings.TrimPrefix(ds[0].String(), "skill.yaml:") != tt.want {
				t.Errorf("diagnostics:\n%s\nwant skill.yaml:%s", ds, tt.want)
			}
		})
	}
}

// A value YAML reads as a mapping because it is not quoted — a template, or text
// holding ': ' — says to quote it, as it should be written; a value that is a
// mapping as written does not.
func TestUnquotedTextSaysToQuoteIt(t *testing.T) {
	t.Parallel()
	const head = "name: x\ndescription: Does x.\n"
	const step = "steps:\n  - id: a\n    tool: echo\n    args: {m: hi}\n"
	for _, tt := range []struct {
		name, src, want string
	}{
		{"condition", head + step + "    condition: {{ inputs.go }}\n",
			`7:16: error: steps[0].condition must be a string, not a mapping (hint: YAML reads {{ }} without quotes as a mapping; quote it: condition: "{{ inputs.go }}")`},
		{"arg", head + "steps:\n  - id: a\n    tool: echo\n    args:\n      m: {{ trigger.id | upper }}\n",
			`7:10: error: steps[0].args.m has a mapping as a key (hint: YAML reads {{ }} without quotes as a mapping; quote it: m: "{{ trigger.id | upper }}")`},
		{"output", head + step + "outputs:\n  id: {{ a.id }}\n",
			`8:7: error: outputs.id has a mapping as a key (hint: YAML reads {{ }} without quotes as a mapping; quote it: id: "{{ a.id }}")`},
		{"example", head + step + "examples:\n  positive:\n    - convert 30 celsius\n    - convert: 451 fahrenheit to celsius\n",
			`10:7: error: examples.positive[1] must be a string, not a mapping (hint: YAML reads ': ' without quotes as a key and its value; quote it: - "convert: 451 fahrenheit to celsius")`},
		{"trigger", head + step + "triggers:\n  - 'com.acme.x'\n  - say \"hi\": in French\n",
			`9:5: error: triggers[1] must be a string, not a mapping (hint: YAML reads ': ' without quotes as a key and its value; quote it: - 'say "hi": in French')`},
		{"a quoted value", head + step + "examples:\n  negative:\n    - weather: 'Paris'\n",
			`9:7: error: examples.negative[0] must be a string, not a mapping`},
		{"a mapping", head + step + "    condition: {a: 1}\n",
			`7:16: error: steps[0].condition must be a string, not a mapping`},
		{"a mapping key", head + step + "outputs:\n  id: {[a]: 1}\n",
			`8:8: error: outputs.id has a list as a key (hint: keys are plain names)`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ds := ParseWorkflow("skill.yaml", []byte(tt.src))
			if len(ds) != 1 || strings.TrimPrefix(ds[0].String(), "skill.yaml:") != tt.want {
				t.Errorf("diagnostics:\n%s\nwant skill.yaml:%s", ds, tt.want)
			}
		})
	}
}

// Hints point users at the guide they have (docs/authoring.md), not at the Go
// source: no hint of any bad fixture names doc.go.
func TestHintsNameTheGuide(t *testing.T) {
	t.Parallel()
	paths, err := filepath.Glob(fixture("bad", "*", "*"))
	if err != nil || len(paths) < 10 {
		t.Fatalf("fixtures %v: %v", paths, err)
	}
	var ds Diagnostics
	for _, p := range paths {
		_, pds := LoadOptions{}.LoadPath(p)
		ds = append(ds, pds...)
	}
	want := map[string]string{ // file:line → hint
		"bad/yaml/templates.yaml:28": "expressions use Python syntax (Starlark); see docs/authoring.md, Templates, conditions and compute",
		"bad/yaml/scopes.yaml:35":    "expressions use Python syntax (Starlark); see docs/authoring.md, Templates, conditions and compute",
	}
	seen := 0
	for _, d := range ds {
		if strings.Contains(d.Hint, "doc.go") {
			t.Errorf("%v: the hint names doc.go", d)
		}
		pos := strings.TrimPrefix(filepath.ToSlash(d.File), fixtures+"/") + ":" + strconv.Itoa(d.Line)
		if h, ok := want[pos]; ok {
			seen++
			if d.Hint != h {
				t.Errorf("%s: hint %q, want %q", pos, d.Hint, h)
			}
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d diagnostics checked were reported:\n%s", seen, len(want), ds)
	}
}

// A syntax error in a condition, template or compute block that writes &&, || or !
// (as CEL does, in the skill's flow controls) says how Python writes them; another
// syntax error points at the guide.
func TestSyntaxErrorHints(t *testing.T) {
	t.Parallel()
	const head = "name: x\ndescription: Does x.\nsteps:\n  - id: a\n    tool: echo\n    args: {m: hi}\n  - id: b\n"
	const python = "expressions here are Python: write &&, ||, ! as and, or, not"
	const guide = "expressions use Python syntax (Starlark); see docs/authoring.md, Templates, conditions and compute"
	for _, tt := range []struct {
		name, src, want string
	}{
		{"condition &&", head + "    tool: echo\n    condition: \"a && a\"\n", python},
		{"template ||", head + "    tool: echo\n    args: {m: \"{{ a || 'none' }}\"}\n", python},
		{"compute !", head + "    compute: \"result = !a\"\n", python},
		{"!= is Python", head + "    tool: echo\n    condition: \"a != \"\n", guide},
		{"&& in a string", head + "    tool: echo\n    condition: \"a == '&&' and\"\n", guide},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, ds := ParseWorkflow("skill.yaml", []byte(tt.src))
			if len(ds) != 1 || ds[0].Hint != tt.want {
				t.Errorf("diagnostics:\n%s\nwant one with the hint %q", ds, tt.want)
			}
		})
	}
}
