// Package skill parses, validates and discovers skills: the SKILL.md and skill.yaml
// files skillbus runs in response to events. It is pure: no NATS, no watching; the
// registry builds on it. This comment is the authoring reference for the format.
//
// # Using the package
//
//	s, ds := skill.ParseSkillMD("skills/triage/SKILL.md", data) // one SKILL.md
//	s, ds := skill.ParseWorkflow("skills/triage/skill.yaml", data) // one skill.yaml
//	s, ds := skill.LoadPath("skills/triage")                   // a directory or single file
//	a, ds := skill.ParseSubagent("subagents/researcher.md", data) // one subagent
//	cat, ds := skill.Discover(skill.DefaultRoots(wd, home)...)  // every root, checked as a catalog
//
// Each returns Diagnostics: errors and warnings with file, line, column, the field,
// a message and a hint, printed like a compiler's ("a/SKILL.md:3:7: error: ...").
// An error rejects the skill (the *Skill is nil; Discover leaves it out of the
// Set); a warning does not. Knobs (known tools, size limits, concurrency) are in
// LoadOptions, whose zero value is the default; its methods mirror the functions.
//
// # Where skills live
//
// A root (see DefaultRoots for the usual discovery paths, first root first) holds:
//
//   - skill directories: a directory with SKILL.md and/or skill.yaml (skill.yml is
//     accepted; both at once is an error), plus any files it needs, by convention in
//     scripts/, references/ and assets/ (Agent Skills);
//   - single-file skills: <name>.md or <name>.yaml;
//   - category directories holding more of either, to any depth up to 8
//     (.claude/skills/<category>/<name>.md);
//   - subagents/*.md. A root named skills also picks up its sibling
//     subagents directory, so .claude/skills finds .claude/subagents.
//
// Entries whose names start with '.' are skipped everywhere (a skill checked out
// with git keeps its .git out of the skill), as are README.md, CHANGELOG.md,
// LICENSE.md, CONTRIBUTING.md, AGENTS.md and CLAUDE.md beside skills. A root may
// itself be a skill directory or a skill file. Roots that do not exist are skipped;
// a root listed twice, or a skill reached twice because one root contains another,
// counts once. Symlinked skill directories and category directories are followed.
//
// # SKILL.md
//
// A SKILL.md starts with YAML front matter: the first line is exactly ---, the
// front matter ends at the next line that is exactly --- (trailing blanks allowed),
// and the rest is the body: markdown instructions. A UTF-8 byte order mark and CRLF
// line ends are accepted; line numbers in diagnostics are the editor's. A SKILL.md
// beside a skill.yaml may leave out the front matter: its whole text is the body.
//
//	---
//	name: triage-issue
//	description: Labels and routes new GitHub issues. Runs when an issue is opened.
//	triggers: [com.github.issues.opened]
//	---
//	# Triage
//	...
//
// The body is the system prompt of an instruction skill and documentation for the
// other kinds. It is checked so that it can instruct a model: a code fence (``` or ~~~, three
// or more) left open is an error at its opening line (a fence closes only with the
// same character, at least as many, and nothing else on the line, as in CommonMark);
// instructions shorter than 50 characters (instruction skills only) or longer than
// 50,000 are warnings. In a skill directory, a markdown link to a file that the
// skill does not have, or that leaves the directory, is a warning.
//
// # Fields
//
// SKILL.md front matter and skill.yaml accept the same metadata fields; a field set
// in both files must have the same value in both (an error otherwise). A key that
// is not a field is a warning with a suggestion ("trigers: did you mean
// triggers?") and is ignored; top-level keys starting with x- are ignored silently,
// which makes them a home for YAML anchors. A value of the wrong type is an error at the
// value ("max_retries must be an integer, not the string \"three\""). Text fields
// take any scalar as written (version: 1.10 is "1.10"). Lists are YAML lists; a
// single string where a list belongs is an error with the fix, except
// allowed-tools, which Agent Skills writes as one space-separated string.
//
//	name             required; see Names
//	description      required; more than 1024 characters warns (Agent Skills)
//	license          text (Agent Skills)
//	compatibility    text; more than 500 characters warns (Agent Skills)
//	metadata         mapping of anything (Agent Skills)
//	allowed-tools    tools the skill may use: a list, or "Bash(git:*) Read" (Agent Skills); also allowed_tools
//	type             free text category: self-improvement, mode, custom, ...; optional
//	version          semantic version 2.0.0; anything else warns; no default (see Choices)
//	author           text
//	triggers         CloudEvent types that activate the skill, and phrases matched in the text; optional; see Triggers
//	anti_triggers    phrases that argue against activation
//	tags             list of text
//	examples         positive: and negative: lists of trigger phrases, for routing evals
//	dependencies     names of skills this one needs; see Discover
//	required_tools   tools that must be present
//	disallowed_tools tools the skill must not get
//	cacheable        boolean; default false (see Choices)
//	max_retries      integer ≥ 0; default 3
//	timeout          seconds (45, 1.5) or a Go duration ("2m"); default 30s;
//	timeout_ms       milliseconds; outside 1s–5m warns; set one of the two
//	priority         high | medium | low; default medium: orders routing candidates
//	                 (not queued runs: see queue_priority)
//	cost_hint        low | medium | high; default medium; also cost
//	repair           approve | auto | off; default approve: how a repairable failure is
//	                 repaired (a proposed patch waits for approval, is applied, or none is made)
//	parallel_safe    boolean; default false
//	always           boolean: consider on every event; default false
//	prerequisites    list of - env: NAME | - command: NAME | - tool: NAME | - file: PATH, each
//	                 with an optional description:; checked by the worker
//	                 before a run (tool.CheckPrerequisites)
//	permissions      network: {outbound: bool}, environment: {allow: [..]}; default
//	                 nothing granted; enforced by the http and exec tools.
//	                 limits: {processes: N, open_files: N, cpu: 10s, memory: 512MiB,
//	                 output: 64KiB}: tighter resource limits for exec processes
//	                 (LimitPermissions); every field optional, each at least 1.
//	                 filesystem: is an error: not supported yet. allow may not name
//	                 SKILLBUS_ variables
//	execution        sandbox: process (the default; none and container are errors: not
//	                 supported), approval:
//	                 auto | ask (default auto), timeout: (the skill's timeout); also
//	                 execution_policy
//	entrypoints      list of name:, command:, description:; see Kinds
//	capabilities     list of text (required for subagents)
//	max_concurrent   integer ≥ 1: at most this many runs across the fleet; the skill gets a
//	                 worker pool of its own, whose consumer admits at most N at once
//	pool             worker pool name: letters, digits, '-', '_'; "solo-" is reserved
//	schedule         when the skill runs without an event: 5 cron fields, a descriptor
//	                 (@hourly, @daily, ...) or @every <duration>; see Schedule
//	timezone         IANA zone the schedule is read in; default UTC
//	catch_up         latest | all: ticks missed while no scheduler ran; default latest
//	filter           CEL expression over the trigger (package flow); the skill takes a
//	                 trigger only when it is true
//	rate_limit       key: (CEL, optional), limit: (≥ 1), period: (whole seconds, 1s
//	                 to 24h): at most limit runs per period and key (see RateLimit)
//	debounce         key: (CEL, optional), period: and timeout: (whole seconds, 1s to
//	                 24h; timeout ≥ period, default 10 periods): a burst of triggers
//	                 runs once, with the last one's data (see Debounce)
//	batch            key: (CEL, optional), max_size: (1 to 1000), timeout: (whole
//	                 seconds, 1s to 24h): up to max_size triggers run once, together,
//	                 when the batch is full or timeout after its first (see Batch)
//	cancel_on        list of type: (a CloudEvent type), match: (CEL over event and
//	                 trigger, optional), timeout: (whole seconds, 1s to 168h; default
//	                 1h): an event that matches cancels the run (see CancelOn)
//	concurrency      up to two entries of key: (CEL, optional) and limit: (1 to 1000):
//	                 at most limit runs at once per key value, the rest waiting; an
//	                 entry without key is max_concurrent (see Concurrency)
//	throttle         key: (CEL, optional), limit: (1 to 10000), period: (whole seconds,
//	                 1s to 24h), burst: (optional): runs beyond limit per period wait
//	                 for their turn (see Throttle)
//	queue_priority   -600 to 600 seconds, or a CEL expression over the trigger giving
//	                 them: the skill's runs queue in their pool as if enqueued that
//	                 much earlier; not with max_concurrent
//
// skill.yaml adds inputs, steps, outputs and confirmations (see Workflows); in a
// SKILL.md front matter they are an error pointing to skill.yaml.
//
// # Names
//
// A skill name is 1–64 characters of lowercase letters, digits, '-' and '_',
// starting with a letter or digit, not ending with a separator, without two
// separators in a row: start_work, error-analyzer. Other skill systems normalise
// names silently, to different separators; skillbus never rewrites a name: an invalid
// one is an error whose hint shows the normalised form ("Weather Report!" → write
// weather-report). NormalizeName (lowercase, '_' → '-') is the lookup key, so two
// skills whose names differ only in '-' and '_' conflict. A skill's name should match
// its directory (Agent Skills) or file name; a mismatch warns.
//
// # Triggers
//
// A trigger is a CloudEvent type that activates the skill: com.github.push,
// io.skillbus.release.tagged. Its dots become NATS subject tokens, so it may hold only
// letters, digits, '_', '-' and '.', without empty tokens. A trigger may be a pattern:
// a token "*" matches one token of the type, a final token ">" one or more
// (com.example.order.*, com.example.>). Types starting with
// "skill." are reserved for explicit invocation (skillbus.trigger.skill.<name>).
// Triggers are optional: a skill without them runs only
// when invoked explicitly or when always: true.
//
// Skill systems that route on words write triggers as words and phrases ("code
// review", "pdf"). Every trigger is also matched as a phrase in the request text,
// case-insensitively on word boundaries; an entry that cannot be a type (it holds a
// space or other punctuation) is a phrase only, kept in TriggerPhrases. An entry
// with a dot that is still not a type (io..skillbus) warns, as it is likely a
// mistyped type. anti_triggers are phrases too: one in the text keeps the skill
// from being chosen by score.
//
// # Tools
//
// With LoadOptions.KnownTools set, every tool in required_tools, allowed-tools and
// workflow steps must be one of them (an error with a suggestion); unknown tools in
// disallowed_tools warn. An argument pattern is not part of the name: Bash(git:*) is
// the tool Bash. Without KnownTools, names are not checked. Either way a tool both
// disallowed and required, allowed or used by a step is an error.
//
// # Kinds
//
// The kind follows from the files, never from a field: a skill with steps is a
// workflow; one with entrypoints and no steps is a script; anything else is an
// instruction skill, its body the system prompt. A skill with nothing to run (a
// skill.yaml with no steps, no entrypoints and no SKILL.md) is an error. type:
// workflow, script or instruction that disagrees with the kind warns.
//
// An entrypoint runs a file of the skill, either directly (command:
// scripts/lint.sh) or through an interpreter named without a path (command:
// [python3, -u, scripts/lint.py]); a string command is split on spaces. The file
// must lie inside the skill directory and exist there: absolute paths, ~ and ..
// are errors. A single-file skill cannot have entrypoints. A lone entrypoint without
// a name is called default, the one script skills run unless told otherwise.
//
// # Workflows
//
// skill.yaml is the workflow, beside a SKILL.md or alone; alone it carries
// the metadata fields too. It is parsed and validated completely:
//
//	inputs:          # a list
//	  - name: issue_key            # an identifier; unique
//	    type: string               # string (default) | integer | number | boolean | array | object
//	    required: true
//	    default: "AAP-1"           # must have the input's type, match enum, pattern, max_length
//	    enum: [..]                 # values of the input's type
//	    pattern: "^[A-Z]+-\\d+$"   # a Go regexp (RE2): no lookaround, no backreferences
//	    max_length: 100            # ≥ 0, for strings and arrays; 0 means no limit
//	steps:           # a list, run in order
//	  - id: get_issue              # an identifier; unique; not inputs, trigger or execution
//	    tool: jira_view_issue      # exactly one of tool and compute
//	    args: {issue_key: "{{ inputs.issue_key }}"}
//	    compute: |                 # statements that assign result
//	    condition: "expr"          # run the step only when true
//	    loop: "{{ items }}"        # run once per element, bound to loop_var (required with loop)
//	    loop_var: item
//	    output: issue_data         # a second name for the step's result
//	    on_error: fail             # fail (default) | continue | retry:N, 1 ≤ N ≤ 10
//	    timeout: 30                # seconds or a Go duration; > 0
//	    parallel_group: 1          # a number or a name; steps of a group run together
//	    depends_on: [a, b]         # earlier steps only, and not of the same parallel group
//	    cache: 300                 # keep the result this long; > 0
//	outputs:         # a mapping, order kept
//	  branch: "{{ branch_name }}"
//	confirmations:   # a list; a human approves before the step runs
//	  - step: create_branch        # an existing step, confirmed once
//	    message: "Create branch {{ branch_name }}?"
//	    default: true
//	    timeout: 5m
//
// Steps run in the order they are listed, so depends_on may only name earlier steps
// and no cycle can form; a step depending on a later one is an error saying so.
// The steps of a parallel group should be listed together (a split group warns).
// Step output names must not be another step's id; two steps writing one output
// name warn (the later result wins). A step timeout longer than the skill's warns.
// loop must be a template ("{{ items }}"); plain text there is an error.
//
// # Templates and names
//
// Args, loop, outputs and confirmation messages are text with {{ expression }}
// templates; condition is one expression and compute a block of statements (a
// Jinja and Python-like syntax, run hermetically). The names they use must
// exist where they are used; an unknown one is an error with a suggestion:
// "{{ get_isue.branch }}" → unknown step or name get_isue; did you mean get_issue?
// The names a step can use:
//
//   - inputs, whose attributes must be declared inputs (inputs.issue_kye is an
//     error with a suggestion);
//   - trigger (the CloudEvent that started the run) and execution (the run: id, ...),
//     provided by the engine;
//   - the id and the output name of every earlier step;
//   - its own loop_var.
//
// Outputs see every step; a confirmation sees the steps before the one it
// confirms. Only the first name of a chain is checked, except for inputs
// (inputs.x, inputs["x"] and inputs.get("x") all name input x, and so does
// inputs.items: a key wins over a dict method; inputs.items() is the method).
// Builtins and filters (len, str, default, lower, ...) are always available. A
// syntax error in a template, condition or compute block is an error at its line
// and column (inside a compute block, the line of the block). Templates are
// compiled with package expr, the same code the engine runs them with, and the
// names and their positions come from expr's Reads, so what validates here is
// what runs there.
//
// # Safety and limits
//
//   - A text file (SKILL.md, skill.yaml, a text resource) may be at most
//     LoadOptions.MaxFileSize, default 100 KiB. A larger SKILL.md or
//     skill.yaml is an error; a larger text resource is listed but not Inline
//     (warning).
//   - All files of a skill together may be at most MaxSkillSize, default 10 MiB, and
//     a skill directory may hold at most MaxFiles files, default 1000; beyond either
//     the skill is rejected.
//   - A symlink inside a skill directory must point inside it (an error otherwise);
//     a broken symlink, a FIFO, a device or a socket is an error, so loading never
//     blocks on a special file.
//   - Resources (every file besides SKILL.md and skill.yaml) are listed with size,
//     sha256 and whether they are binary (a NUL byte, or not UTF-8); binary files are
//     never inlined. SKILL.md and skill.yaml must be UTF-8 text.
//   - YAML aliases may expand to at most 100,000 nodes per file; duplicate keys are
//     errors; anchors, aliases and merge keys (<<) otherwise work.
//
// # Discovery
//
// Discover reads directories and loads skills concurrently (LoadOptions.Concurrency,
// default twice GOMAXPROCS), then checks the catalog as a whole, in discovery order
// (roots in order, then a depth-first walk of each root in lexical order), so the
// result never depends on timing:
//
//   - The first definition of a name wins. A later root's skill of the same name is
//     shadowed: a warning on the shadowed file naming the winner. The same name twice
//     in one root is an error on the second. Names equal but for '-' and '_' conflict:
//     an error on the second.
//   - A dependency must name a skill in the catalog (matched as NormalizeName does):
//     a missing one rejects the dependent skill, with a suggestion.
//   - Dependency cycles are named in order ("dependency cycle: a → b → c → a") on
//     every member, and every member is rejected.
//   - A skill depending on a rejected skill is rejected too, saying which; every
//     other skill still loads.
//
// Subagents are a namespace of their own, with the same first-wins rule; a subagent
// must list capabilities.
//
// # The loaded skill
//
// The parser fills in the defaults, so a *Skill reads as it will run: priority,
// cost_hint, max_retries, timeout, execution sandbox and approval. Source is the main
// file (SKILL.md, else skill.yaml, else the single file), Dir the skill directory,
// Body the instructions, Step.Line each step's line in Workflow.Source. Digest is
// the sha256 of a manifest of the skill's files in sha256sum format (one
// "<sha256>  <relative path>" line per file, sorted by path), so it changes exactly
// when a file's content or name does. A Skill is JSON (the catalog in KV): integers
// in free-form values come back as int, not float64; a whole-number float
// (ratio: 2.0) comes back as the int 2.
//
// # Choices
//
// Where the skill systems these formats come from (see docs/architecture.md)
// disagree or leave a question open:
//
//   - Names: some use '-' (error-analyzer), others '_' (start_work). Both are
//     allowed, never rewritten, and treated as the same for lookups and conflicts.
//   - type and triggers, which some systems require, are optional; name and
//     description, required by Agent Skills, are required.
//   - version: some systems default to 0.1.0. skillbus leaves it empty so that a
//     pinned run (the plan records name@version and the worker runs that version)
//     falls back to the content digest; a default version would make every edit of
//     an unversioned skill look the same.
//   - author: some systems default to "Unknown"; skillbus leaves it empty.
//   - cacheable: some parsers default it to true; skillbus to false, because
//     caching the result of a side-effecting skill would skip the side effect.
//   - max_retries 3 and timeout 30s are the defaults. An execution-policy timeout
//     of 120s, another system's default, is not a second default:
//     execution.timeout is the skill's timeout.
//   - approval: some systems default to ask, which in an event-driven system would
//     park every run until a human answers; skillbus defaults to auto and a skill
//     opts in with approval: ask.
//   - Unknown keys warn rather than fail, so skill files written for other systems
//     still load; misspelt values of known keys (priority: urgent) are errors.
//   - A skill.yaml's spec.type, which some systems use to name the kind, is not
//     read: the kind follows from the files.
//
// # Where things are
//
// One concern per file, so that "where is skill.yaml's loop decoded" has a
// one-glance answer (workflow_steps.go, the "loop" row of stepFields):
//
//   - skill.go: the model (Skill, Workflow, Step, Input, ...); json.go its JSON.
//   - discover.go: walking roots into a Set; discover_resolve.go: shadowing,
//     name conflicts and dependency cycles across skills.
//   - load.go: reading one skill directory or file; parse.go: SKILL.md and
//     skill.yaml into one builder; markdown.go: front matter and the body.
//   - fields.go: the table of top-level fields and the decoder of each;
//     fields_meta.go: decoders of the structured ones (permissions,
//     prerequisites, execution, entrypoints, examples); tools.go: tool lists.
//   - builder.go: the checks across fields once every field is decoded.
//   - workflow.go: the workflow's checks across steps; workflow_inputs.go,
//     workflow_steps.go (one decoder per step field), workflow_outputs.go
//     (outputs and confirmations): their decoders; workflow_sites.go and
//     workflow_refs.go: templates and expressions, compiled by package expr,
//     and the names they read.
//   - yaml_decoder.go: typed reads of YAML nodes with positions;
//     yaml_errors.go: YAML syntax errors made readable.
//   - diagnostic.go, suggest.go, name.go: messages, "did you mean", names.
//   - subagent.go: subagents/*.md.
package skill
