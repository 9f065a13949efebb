package skill

import (
	"fmt"
	"slices"
	"strings"
)

// resolve applies the catalog rules to the loaded skills: names, then dependencies.
func resolve(results []result, ds *Diagnostics) []*Skill {
	type entry struct {
		l    *loaded
		root int
	}
	var accepted []entry
	byKey := map[string]int{} // NormalizeName → index in accepted
	invalid := map[string]string{}
	for _, r := range results {
		if r.invalid != "" {
			if _, ok := invalid[NormalizeName(r.invalid)]; !ok {
				invalid[NormalizeName(r.invalid)] = r.path
			}
		}
		if r.l == nil {
			continue
		}
		s := r.l.skill
		key := NormalizeName(s.Name)
		namePos := r.l.pos["name"]
		if k, dup := byKey[key]; dup {
			first := accepted[k]
			switch {
			case first.l.skill.Name != s.Name:
				*ds = append(*ds, namePos.diag(SeverityError, "name", "rename one of them: names equal but for '-' and '_' are the same skill to a router",
					"skill %s conflicts with skill %s at %s", s.Name, first.l.skill.Name, first.l.skill.Source))
			case first.root == r.root:
				*ds = append(*ds, namePos.diag(SeverityError, "name", "rename or remove one of them",
					"skill %s is defined twice in one root; the first definition is at %s", s.Name, first.l.skill.Source))
			default:
				*ds = append(*ds, namePos.diag(SeverityWarning, "name", "rename one of them if both are wanted",
					"skill %s is shadowed by %s, found first (the first root wins)", s.Name, first.l.skill.Source))
			}
			continue
		}
		byKey[key] = len(accepted)
		accepted = append(accepted, entry{l: r.l, root: r.root})
	}
	// Dependencies: missing ones reject the skill; so do cycles, each named in order;
	// then every skill depending on a rejected one.
	rejected := make([]bool, len(accepted))
	deps := make([][]int, len(accepted))
	for i, e := range accepted {
		s := e.l.skill
		for j, dep := range s.Dependencies {
			k, ok := byKey[NormalizeName(dep)]
			if where, bad := invalid[NormalizeName(dep)]; !ok && bad {
				p := e.l.pos[fmt.Sprintf("dependencies[%d]", j)]
				if p.file == "" {
					p = at{file: s.Source}
				}
				*ds = append(*ds, p.diag(SeverityError, fmt.Sprintf("dependencies[%d]", j), "fix that skill first",
					"skill %s depends on %s, which was rejected (see %s)", s.Name, dep, where))
				rejected[i] = true
				continue
			}
			if !ok {
				names := make([]string, 0, len(accepted))
				for _, a := range accepted {
					names = append(names, a.l.skill.Name)
				}
				p := e.l.pos[fmt.Sprintf("dependencies[%d]", j)]
				if p.file == "" {
					p = at{file: s.Source}
				}
				*ds = append(*ds, p.diag(SeverityError, fmt.Sprintf("dependencies[%d]", j), "",
					"skill %s depends on %s, which is not in the catalog%s", s.Name, dep, didYouMean(dep, names)))
				rejected[i] = true
				continue
			}
			deps[i] = append(deps[i], k)
		}
	}
	for _, cycle := range cycles(deps) {
		names := make([]string, 0, len(cycle)+1)
		for _, k := range cycle {
			names = append(names, accepted[k].l.skill.Name)
		}
		names = append(names, names[0])
		chain := strings.Join(names, " → ")
		for n, k := range cycle {
			s := accepted[k].l.skill
			next := accepted[cycle[(n+1)%len(cycle)]].l.skill.Name
			p := at{file: s.Source}
			for j, dep := range s.Dependencies {
				if NormalizeName(dep) == NormalizeName(next) {
					p = accepted[k].l.pos[fmt.Sprintf("dependencies[%d]", j)]
				}
			}
			if p.file == "" {
				p = at{file: s.Source}
			}
			*ds = append(*ds, p.diag(SeverityError, "dependencies", "break the cycle: remove one of these dependencies",
				"dependency cycle: %s", chain))
			rejected[k] = true
		}
	}
	for changed := true; changed; {
		changed = false
		for i, e := range accepted {
			if rejected[i] {
				continue
			}
			for _, k := range deps[i] {
				if rejected[k] {
					s := e.l.skill
					p := at{file: s.Source}
					for j, dep := range s.Dependencies {
						if NormalizeName(dep) == NormalizeName(accepted[k].l.skill.Name) {
							p = e.l.pos[fmt.Sprintf("dependencies[%d]", j)]
						}
					}
					if p.file == "" {
						p = at{file: s.Source}
					}
					*ds = append(*ds, p.diag(SeverityError, "dependencies", "fix that skill first",
						"skill %s depends on %s, which was rejected", s.Name, accepted[k].l.skill.Name))
					rejected[i], changed = true, true
					break
				}
			}
		}
	}
	var out []*Skill
	for i, e := range accepted {
		if !rejected[i] {
			out = append(out, e.l.skill)
		}
	}
	return out
}

// cycles finds the dependency cycles: for each strongly connected component with
// more than one member, or a member depending on itself, one cycle through its first
// member (in discovery order), in dependency order.
func cycles(deps [][]int) [][]int {
	n := len(deps)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	var comps [][]int
	counter := 0
	// Iterative Tarjan, so that a long dependency chain cannot exhaust the stack.
	type frame struct{ v, next int }
	for start := range n {
		if index[start] >= 0 {
			continue
		}
		call := []frame{{v: start}}
		index[start], low[start] = counter, counter
		counter++
		stack = append(stack, start)
		onStack[start] = true
		for len(call) > 0 {
			f := &call[len(call)-1]
			if f.next < len(deps[f.v]) {
				w := deps[f.v][f.next]
				f.next++
				switch {
				case index[w] < 0:
					index[w], low[w] = counter, counter
					counter++
					stack = append(stack, w)
					onStack[w] = true
					call = append(call, frame{v: w})
				case onStack[w]:
					low[f.v] = min(low[f.v], index[w])
				}
				continue
			}
			v := f.v
			call = call[:len(call)-1]
			if len(call) > 0 {
				u := call[len(call)-1].v
				low[u] = min(low[u], low[v])
			}
			if low[v] == index[v] {
				var comp []int
				for {
					w := stack[len(stack)-1]
					stack = stack[:len(stack)-1]
					onStack[w] = false
					comp = append(comp, w)
					if w == v {
						break
					}
				}
				comps = append(comps, comp)
			}
		}
	}
	var out [][]int
	for _, comp := range comps {
		if len(comp) == 1 && !slices.Contains(deps[comp[0]], comp[0]) {
			continue
		}
		in := map[int]bool{}
		for _, v := range comp {
			in[v] = true
		}
		first := slices.Min(comp)
		out = append(out, cycleThrough(first, deps, in))
	}
	slices.SortFunc(out, func(a, b []int) int { return a[0] - b[0] })
	return out
}

// cycleThrough is a shortest cycle from v back to v within a component (BFS).
func cycleThrough(v int, deps [][]int, in map[int]bool) []int {
	prev := map[int]int{}
	queue := []int{v}
	for len(queue) > 0 {
		u := queue[0]
		queue = queue[1:]
		for _, w := range deps[u] {
			if !in[w] {
				continue
			}
			if w == v {
				path := []int{u}
				for path[len(path)-1] != v {
					path = append(path, prev[path[len(path)-1]])
				}
				slices.Reverse(path)
				return path
			}
			if _, ok := prev[w]; !ok {
				prev[w] = u
				queue = append(queue, w)
			}
		}
	}
	return []int{v}
}
