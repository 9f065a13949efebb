package skill

import (
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

func decodeExamples(b *builder, d *decoder, p pair) {
	ps, _ := d.pairs(p.v, "examples", "write positive: [...] and negative: [...]")
	for _, e := range ps {
		f := "examples." + e.key
		switch e.key {
		case "positive":
			items, _ := d.strList(e.v, f)
			b.s.Examples.Positive = b.unique(d, f, items, nil)
		case "negative":
			items, _ := d.strList(e.v, f)
			b.s.Examples.Negative = b.unique(d, f, items, nil)
		default:
			d.warnAt(e.k, f, hintFor(e.key, []string{"positive", "negative"}), "unknown field %s; it is ignored", f)
		}
	}
}

// hintFor is "did you mean X?" or a list of the valid keys.
func hintFor(key string, valid []string) string {
	if c := closest(key, valid); c != "" {
		return "did you mean " + c + "?"
	}
	return "valid keys: " + strings.Join(valid, ", ")
}

// misspeltHint is hintFor an unknown key among ps, the pairs of its mapping. When
// the field meant is not also set and leaving it out changes what the skill does,
// the hint says what it does as written (without[field meant]), since the warning is
// all that tells the author: a misspelt required: leaves the input optional.
func misspeltHint(key string, valid []string, ps []pair, without map[string]string) string {
	c := closest(key, valid)
	if c == "" {
		return "valid keys: " + strings.Join(valid, ", ")
	}
	hint := "did you mean " + c + "?"
	if w := without[c]; w != "" && !slices.ContainsFunc(ps, func(q pair) bool { return q.key == c }) {
		hint += " As written, " + w
	}
	return hint
}

var prerequisiteKinds = []string{"env", "command", "tool", "file"}

func decodePrerequisites(b *builder, d *decoder, p pair) {
	nodes, _ := d.seq(p.v, "prerequisites", "write a list such as - env: GITHUB_TOKEN")
	for i, n := range nodes {
		f := fmt.Sprintf("prerequisites[%d]", i)
		ps, ok := d.pairs(n, f, "write env: NAME, command: NAME, tool: NAME or file: PATH")
		if !ok {
			continue
		}
		var pr Prerequisite
		for _, e := range ps {
			ef := f + "." + e.key
			switch {
			case e.key == "description":
				pr.Description, _ = d.str(e.v, ef)
			case slices.Contains(prerequisiteKinds, e.key):
				if pr.Kind != "" {
					d.errAt(e.k, ef, "write one prerequisite per list item", "%s names both %s and %s", f, pr.Kind, e.key)
					continue
				}
				s, ok := d.str(e.v, ef)
				if !ok || strings.TrimSpace(s) == "" {
					d.errAt(e.v, ef, "", "%s is empty", ef)
					continue
				}
				pr.Kind, pr.Name = PrerequisiteKind(e.key), s
			default:
				d.warnAt(e.k, ef, hintFor(e.key, append(slices.Clone(prerequisiteKinds), "description")), "unknown field %s; it is ignored", ef)
			}
		}
		if pr.Kind == "" {
			if len(ps) > 0 || isNull(d.resolve(n)) {
				d.errAt(n, f, "write env: NAME, command: NAME, tool: NAME or file: PATH", "%s says nothing to check", f)
			}
			continue
		}
		b.s.Prerequisites = append(b.s.Prerequisites, pr)
	}
}

func decodePermissions(b *builder, d *decoder, p pair) {
	ps, _ := d.pairs(p.v, "permissions", "")
	perm := &b.s.Permissions
	for _, e := range ps {
		f := "permissions." + e.key
		switch e.key {
		case "filesystem":
			fps, _ := d.pairs(e.v, f, "write read: [paths] and write: [paths]")
			for _, fe := range fps {
				ff := f + "." + fe.key
				switch fe.key {
				case "read":
					items, _ := d.strList(fe.v, ff)
					perm.Filesystem.Read = b.unique(d, ff, items, nil)
				case "write":
					items, _ := d.strList(fe.v, ff)
					perm.Filesystem.Write = b.unique(d, ff, items, nil)
				default:
					d.warnAt(fe.k, ff, hintFor(fe.key, []string{"read", "write"}), "unknown field %s; it is ignored", ff)
				}
			}
		case "network":
			nps, _ := d.pairs(e.v, f, "write outbound: true")
			for _, ne := range nps {
				nf := f + "." + ne.key
				if ne.key != "outbound" {
					d.warnAt(ne.k, nf, hintFor(ne.key, []string{"outbound"}), "unknown field %s; it is ignored", nf)
					continue
				}
				perm.Network.Outbound, _ = d.boolean(ne.v, nf)
			}
		case "environment":
			eps, _ := d.pairs(e.v, f, "write allow: [VARIABLE, ...]")
			for _, ee := range eps {
				ef := f + "." + ee.key
				if ee.key != "allow" {
					d.warnAt(ee.k, ef, hintFor(ee.key, []string{"allow"}), "unknown field %s; it is ignored", ef)
					continue
				}
				items, _ := d.strList(ee.v, ef)
				perm.Environment.Allow = b.unique(d, ef, items, nil)
			}
		case "limits":
			decodeLimits(d, e, f, &perm.Limits)
		default:
			d.warnAt(e.k, f, hintFor(e.key, []string{"filesystem", "network", "environment", "limits"}), "unknown field %s; it is ignored", f)
		}
	}
}

var limitFields = []string{"processes", "open_files", "cpu", "memory", "output"}

func decodeLimits(d *decoder, p pair, f string, l *LimitPermissions) {
	lps, _ := d.pairs(p.v, f, "write e.g. processes: 64, open_files: 256, cpu: 10s, memory: 512MiB, output: 64KiB")
	for _, le := range lps {
		lf := f + "." + le.key
		switch le.key {
		case "processes", "open_files":
			n, ok := d.integer(le.v, lf)
			if !ok {
				continue
			}
			if n < 1 {
				d.errAt(le.v, lf, "write a whole number of at least 1, or leave it out to keep the worker's", "%s must be at least 1, not %d", lf, n)
				continue
			}
			if le.key == "processes" {
				l.Processes = n
			} else {
				l.OpenFiles = n
			}
		case "cpu":
			v, ok := d.duration(le.v, lf)
			if !ok {
				continue
			}
			if v < Duration(time.Second) || v%Duration(time.Second) != 0 {
				d.errAt(le.v, lf, "write whole seconds, e.g. 10s or 2m", "%s must be whole seconds, at least 1s, not %s", lf, v)
				continue
			}
			l.CPU = v
		case "memory", "output":
			n, ok := d.size(le.v, lf)
			if !ok {
				continue
			}
			if le.key == "memory" {
				l.Memory = n
			} else {
				l.Output = n
			}
		default:
			d.warnAt(le.k, lf, hintFor(le.key, limitFields), "unknown field %s; it is ignored", lf)
		}
	}
}

func decodeExecution(b *builder, d *decoder, p pair) {
	ps, _ := d.pairs(p.v, "execution", "write sandbox:, approval: and timeout:")
	for _, e := range ps {
		f := "execution." + e.key
		switch e.key {
		case "sandbox", "approval":
			valid := sandboxes
			dst := &b.s.Execution.Sandbox
			if e.key == "approval" {
				valid, dst = approvals, &b.s.Execution.Approval
			}
			s, ok := d.str(e.v, f)
			if !ok {
				continue
			}
			if !slices.Contains(valid, s) {
				d.errAt(e.v, f, "use one of "+strings.Join(valid, ", "), "%s %q is not valid%s", f, s, didYouMean(s, valid))
				continue
			}
			*dst = s
		case "timeout":
			if v, ok := d.duration(e.v, f); ok {
				b.setTimeout(d, e, v)
			}
		default:
			d.warnAt(e.k, f, hintFor(e.key, []string{"sandbox", "approval", "timeout"}), "unknown field %s; it is ignored", f)
		}
	}
}

func decodeEntrypoints(b *builder, d *decoder, p pair) {
	nodes, _ := d.seq(p.v, "entrypoints", "write a list such as - name: default, command: scripts/run.sh")
	for i, n := range nodes {
		f := fmt.Sprintf("entrypoints[%d]", i)
		ps, ok := d.pairs(n, f, "write name: and command:")
		if !ok {
			continue
		}
		var ep Entrypoint
		var cmdNode *yaml.Node
		for _, e := range ps {
			ef := f + "." + e.key
			switch e.key {
			case "name":
				ep.Name, _ = d.str(e.v, ef)
			case "description":
				ep.Description, _ = d.str(e.v, ef)
			case "command":
				cmdNode = e.v
				r := d.resolve(e.v)
				if r != nil && r.Kind == yaml.ScalarNode && !isNull(r) {
					s, _ := d.str(e.v, ef)
					ep.Command = strings.Fields(s)
				} else {
					items, _ := d.strList(e.v, ef)
					for _, it := range items {
						ep.Command = append(ep.Command, it.s)
					}
				}
			default:
				d.warnAt(e.k, ef, hintFor(e.key, []string{"name", "command", "description"}), "unknown field %s; it is ignored", ef)
			}
		}
		if ep.Name == "" {
			if len(nodes) == 1 {
				ep.Name = DefaultEntrypoint
			} else {
				d.errAt(n, f+".name", "name each entrypoint; the one run by default is called default", "%s has no name", f)
				continue
			}
		}
		if len(ep.Command) == 0 {
			d.errAt(n, f+".command", "write command: scripts/run.sh, or a list such as [python3, scripts/run.py]", "entrypoint %s has no command", ep.Name)
			continue
		}
		if slices.ContainsFunc(b.s.Entrypoints, func(o Entrypoint) bool { return o.Name == ep.Name }) {
			d.errAt(n, f+".name", "give each entrypoint its own name", "entrypoint %s is defined twice", ep.Name)
			continue
		}
		if prob, hint := entrypointProblem(ep.Command); prob != "" {
			d.errAt(cmdNode, f+".command", hint, "entrypoint %s %s", ep.Name, prob)
			continue
		}
		b.pos["entrypoints."+ep.Name] = d.pos(cmdNode)
		b.s.Entrypoints = append(b.s.Entrypoints, ep)
	}
}

var (
	sandboxes = []string{SandboxNone, SandboxProcess, SandboxContainer}
	approvals = []string{ApprovalAuto, ApprovalAsk}
)

// entrypointProblem checks an entrypoint's command: it runs a file inside the skill
// directory, either directly (scripts/run.sh) or through an interpreter named without
// a path (python3 scripts/run.py).
func entrypointProblem(cmd []string) (problem, hint string) {
	script := entrypointScript(cmd)
	const hint0 = "run a file of the skill: scripts/run.sh, or [python3, scripts/run.py]"
	switch {
	case script == "":
		return "runs no file of the skill", hint0
	case path.IsAbs(script) || filepath.IsAbs(script) || strings.HasPrefix(script, "~"):
		return fmt.Sprintf("runs %s, outside the skill directory", script), hint0
	case !filepath.IsLocal(filepath.FromSlash(script)):
		return fmt.Sprintf("runs %s, outside the skill directory", script), hint0
	}
	return "", ""
}

// entrypointScript is the file an entrypoint command runs: the program itself when it
// is a path, else the first argument that is not a flag.
func entrypointScript(cmd []string) string {
	if len(cmd) == 0 {
		return ""
	}
	if strings.ContainsAny(cmd[0], `/\`) || path.Ext(cmd[0]) != "" {
		return cmd[0]
	}
	for _, a := range cmd[1:] {
		if !strings.HasPrefix(a, "-") {
			return a
		}
	}
	return ""
}
