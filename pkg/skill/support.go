package skill

import (
	"strings"

	"go.yaml.in/yaml/v3"
)

// reservedEnvPrefix starts the names of the variables that configure skillbus's
// own processes, credentials included; no skill is given them.
const reservedEnvPrefix = "SKILLBUS_"

// checkSupported rejects what a skill may write but skillbus cannot enforce yet,
// so that no field silently does nothing. What is enforced: permissions.network
// (the http tool refuses requests, exec processes get no network) and
// permissions.environment (exec processes get those variables of the worker).
func (b *builder) checkSupported() {
	if set, ok := b.set["permissions"]; ok {
		d := set.d
		if k, _ := quietLookup(d, set.val, "filesystem"); k != nil {
			d.errAt(k, "permissions.filesystem", "remove it; the exec tool gives each process a working directory of its own",
				"permissions.filesystem is not supported yet: skillbus cannot confine a process to paths; "+
					"a process may read and write what its user may: under a worker running as root, a user of the call's own (nobody for exec steps of a worker with --exec-dir), "+
					"with no more rights than any user beyond its working directory; under a worker of another user, that user")
		}
		if _, env := quietLookup(d, set.val, "environment"); env != nil {
			if _, allow := quietLookup(d, env, "allow"); allow != nil {
				if r := d.resolve(allow); r != nil && r.Kind == yaml.SequenceNode {
					for _, it := range r.Content {
						if ri := d.resolve(it); ri != nil && strings.HasPrefix(ri.Value, reservedEnvPrefix) {
							d.errAt(it, "permissions.environment.allow", "pass what the skill needs under another name",
								"permissions.environment.allow names %s: variables starting with %s configure skillbus itself and hold its credentials; no skill is given them",
								ri.Value, reservedEnvPrefix)
						}
					}
				}
			}
		}
	}
	if set, ok := b.set["execution"]; ok {
		d := set.d
		if _, v := quietLookup(d, set.val, "sandbox"); v != nil {
			switch b.s.Execution.Sandbox {
			case SandboxContainer:
				d.errAt(v, "execution.sandbox", "remove it, or write process",
					"execution.sandbox container is not supported yet: exec steps and entrypoints run in the process sandbox "+
						"(their own user, PID and network namespaces, an unprivileged user, resource limits)")
			case SandboxNone:
				d.errAt(v, "execution.sandbox", "remove it, or write process",
					"execution.sandbox none is not supported: every exec step and entrypoint runs in the process sandbox; a skill cannot opt out of it")
			}
		}
	}
}

// quietLookup finds key in the mapping n (following aliases and one level of
// merge keys) without reporting anything: the field's decoder has reported its
// problems already.
func quietLookup(d *decoder, n *yaml.Node, key string) (k, v *yaml.Node) {
	n = d.resolve(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn := d.resolve(n.Content[i])
		if kn == nil {
			continue
		}
		if kn.Value == key && kn.ShortTag() != "!!merge" {
			return n.Content[i], n.Content[i+1]
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if kn := n.Content[i]; kn.Kind == yaml.ScalarNode && kn.ShortTag() == "!!merge" {
			if k, v := quietLookup(d, n.Content[i+1], key); k != nil {
				return k, v
			}
		}
	}
	return nil, nil
}
